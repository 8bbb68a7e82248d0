// The build id compiled into this binary (see gicomm/net/oob.h); alone in its file so that a new
// id recompiles only this.
#include "gicomm/net/build_id.h"
#include "gicomm/net/oob.h"

const char* gicomm::net::build_id() { return GICOMM_BUILD_ID; }
