// The Catch2 runner for the whole suite, native and WebAssembly (under Node) alike.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
