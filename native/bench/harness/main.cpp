// Every driver's main: the harness's point loop over the experiments linked into the program.
#include "harness/runner.h"

int main(int argc, char** argv) { return gicomm::bench::run_driver(argc, argv); }
