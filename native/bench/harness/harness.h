// What an experiment file includes: the runner (Run, GICOMM_EXPERIMENT), records and statistics.
#pragma once

#include "harness/errors.h"
#include "harness/json.h"
#include "harness/params.h"
#include "harness/points.h"
#include "harness/record.h"
#include "harness/runner.h"
