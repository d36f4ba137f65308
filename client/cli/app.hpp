// The forgeyard command line: CLI11 commands built from the commands_*.cpp files, the overview
// that `forgeyard --help` prints, and the exit codes of exit_codes.hpp.
#pragma once

namespace forgeyard::cli {

int run(int argc, char** argv);

}  // namespace forgeyard::cli
