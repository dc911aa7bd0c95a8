# Test registration: unit tests (criterion), fuzz corpus replays, the e2e
# pytest suite and the conformance suite, each under its own ctest label.

find_program(SB_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT SB_PYTHON)
  find_program(SB_PYTHON python3)
endif()

pkg_check_modules(CRITERION IMPORTED_TARGET criterion)
if(CRITERION_FOUND)
  file(GLOB SB_UNIT_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/test_*.c)
  foreach(src ${SB_UNIT_TESTS})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_link_libraries(${name} PRIVATE sb_core PkgConfig::CRITERION)
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
    add_test(NAME unit.${name} COMMAND ${name} --jobs 1)
    set_tests_properties(unit.${name} PROPERTIES LABELS unit TIMEOUT 120)
  endforeach()
else()
  message(WARNING "criterion not found: unit tests are not built (run ci/install-deps.sh)")
endif()

# Every fuzz target also builds as an ordinary program that replays its seed
# corpus and past crashes (fuzz/fuzz_main.c), so CI checks them without AFL++.
file(GLOB SB_FUZZERS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/*_fuzzer.c)
foreach(src ${SB_FUZZERS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name}_replay ${src} ${CMAKE_SOURCE_DIR}/fuzz/fuzz_main.c)
  target_link_libraries(${name}_replay PRIVATE sb_core)
  set_target_properties(${name}_replay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  add_test(NAME fuzz.${name} COMMAND ${name}_replay
           ${CMAKE_SOURCE_DIR}/fuzz/corpus/${name} ${CMAKE_SOURCE_DIR}/fuzz/regressions/${name})
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 300)
endforeach()

if(EXISTS ${CMAKE_SOURCE_DIR}/tests/mocks)
  add_test(NAME mocks COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider
           ${CMAKE_SOURCE_DIR}/tests/mocks --mock-worker ${CMAKE_BINARY_DIR}/mock_workers/mock_worker)
  set_tests_properties(mocks PROPERTIES LABELS mocks TIMEOUT 300)
endif()

if(EXISTS ${CMAKE_SOURCE_DIR}/tests/e2e)
  add_test(NAME e2e COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider -n 2
           ${CMAKE_SOURCE_DIR}/tests/e2e --build-dir ${CMAKE_BINARY_DIR})
  set_tests_properties(e2e PROPERTIES LABELS e2e TIMEOUT 900)

  # The same scenarios with the daemon under valgrind memcheck: zero errors,
  # zero bytes lost, no fd open at exit beyond stdio (ci/valgrind.py judges).
  find_program(SB_VALGRIND valgrind)
  if(SB_VALGRIND)
    add_test(NAME valgrind.e2e COMMAND ${SB_PYTHON} ${CMAKE_SOURCE_DIR}/ci/valgrind.py
             ${CMAKE_BINARY_DIR}/valgrind/e2e --
             ${SB_PYTHON} -m pytest -q -p no:cacheprovider -n 2
             ${CMAKE_SOURCE_DIR}/tests/e2e --build-dir ${CMAKE_BINARY_DIR})
    set_tests_properties(valgrind.e2e PROPERTIES LABELS valgrind TIMEOUT 1800)
  endif()
endif()

# Real MCP software through the daemon (issue 16): the pinned, unmodified
# SDK client and reference servers of tests/interop (ci/install-deps.sh runs
# its `npm ci`), in stdio, unix and TCP modes, with and without affinity.
find_program(SB_NODE node)
if(SB_NODE AND EXISTS ${CMAKE_SOURCE_DIR}/tests/interop/bus/bus.test.mjs)
  add_test(NAME interop.bus COMMAND ${SB_NODE} --test --test-concurrency=1
           ${CMAKE_SOURCE_DIR}/tests/interop/bus/bus.test.mjs)
  set_tests_properties(interop.bus PROPERTIES LABELS interop TIMEOUT 900
                       ENVIRONMENT STDIO_BUS=$<TARGET_FILE:stdio_bus>)
endif()

if(EXISTS ${CMAKE_SOURCE_DIR}/conformance/CMakeLists.txt)
  include(${CMAKE_SOURCE_DIR}/conformance/CMakeLists.txt)
endif()
