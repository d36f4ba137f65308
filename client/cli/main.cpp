// forgeyard: the command line of the coordination store (README.md, "CLI").
#include "app.hpp"

int main(int argc, char** argv) {
  return forgeyard::cli::run(argc, argv);
}
