# Test registration: unit tests (criterion), fuzz corpus replays, the e2e
# pytest suite and the conformance suite, each under its own ctest label.

# Lanes for the heavy tests, the ones that start daemons, suites or builds and
# mostly wait on them (the suite against our daemon uses a fifth of two cores):
# each holds the lock of lane a, b or c, so three run at once at most, beside
# the light unlocked tests (ci/test-all.sh runs ctest with two slots more than
# cores). sb_heavy() gives each its lane and its COST, the seconds it took in a
# fresh-clone CI run: ctest starts first the tests others depend on (the quiet
# verdicts busy and the matrix read), then the costliest, so no long test is
# left to run alone at the end. Their times are balanced across the lanes. No test
# judges a time (those live in bench/), so none needs a lane to itself.
set(SB_LANE_A sb_lane_a)
set(SB_LANE_B sb_lane_b)
set(SB_LANE_C sb_lane_c)
function(sb_heavy test lane seconds)
  set_tests_properties(${test} PROPERTIES RESOURCE_LOCK ${lane} COST ${seconds})
endfunction()

find_program(SB_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT SB_PYTHON)
  find_program(SB_PYTHON python3)
endif()

pkg_check_modules(CRITERION IMPORTED_TARGET criterion)
if(CRITERION_FOUND)
  file(GLOB SB_UNIT_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/unit/test_*.c)
  foreach(src ${SB_UNIT_TESTS})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_link_libraries(${name} PRIVATE sb_core PkgConfig::CRITERION)
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
    add_test(NAME unit.${name} COMMAND ${name} --jobs 1)
    set_tests_properties(unit.${name} PROPERTIES LABELS unit TIMEOUT 120)
  endforeach()
else()
  message(WARNING "criterion not found: unit tests are not built (run ci/install-deps.sh)")
endif()

# The C tree as .clang-format formats it (fails listing the files that are not).
find_program(SB_CLANG_FORMAT NAMES clang-format-14 clang-format)
if(SB_CLANG_FORMAT)
  add_test(NAME format COMMAND ${PROJECT_SOURCE_DIR}/ci/format-check.sh)
  set_tests_properties(format PROPERTIES LABELS format TIMEOUT 120
                       ENVIRONMENT CLANG_FORMAT=${SB_CLANG_FORMAT})
endif()

# No call or include cycle between src/ files (issue 33): the calls read from
# the core's objects (nm), the includes from the sources.
add_test(NAME layering COMMAND ${SB_PYTHON} ${PROJECT_SOURCE_DIR}/ci/src_cycles.py $<TARGET_OBJECTS:sb_floor_base> $<TARGET_OBJECTS:sb_floor_os>
         $<TARGET_OBJECTS:sb_floor_cfg> $<TARGET_OBJECTS:sb_floor_route> $<TARGET_OBJECTS:sb_floor_bus>
         $<TARGET_OBJECTS:sb_floor_daemon>
         COMMAND_EXPAND_LISTS)
set_tests_properties(layering PROPERTIES LABELS layering TIMEOUT 60)

# Every fuzz target also builds as an ordinary program that replays its seed
# corpus and past crashes (fuzz/fuzz_main.c), so CI checks them without AFL++.
file(GLOB SB_FUZZERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/fuzz/*_fuzzer.c)
foreach(src ${SB_FUZZERS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name}_replay ${src} ${PROJECT_SOURCE_DIR}/fuzz/fuzz_main.c)
  target_link_libraries(${name}_replay PRIVATE sb_core)
  set_target_properties(${name}_replay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz)
  add_test(NAME fuzz.${name} COMMAND ${name}_replay
           ${PROJECT_SOURCE_DIR}/fuzz/corpus/${name} ${PROJECT_SOURCE_DIR}/fuzz/regressions/${name})
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 300)
endforeach()

if(EXISTS ${PROJECT_SOURCE_DIR}/tests/mocks)
  add_test(NAME mocks COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider
           ${PROJECT_SOURCE_DIR}/tests/mocks --mock-worker ${PROJECT_BINARY_DIR}/mock_workers/mock_worker)
  set_tests_properties(mocks PROPERTIES LABELS mocks TIMEOUT 300)
endif()

if(EXISTS ${PROJECT_SOURCE_DIR}/tests/e2e)
  add_test(NAME e2e COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider -n 2
           ${PROJECT_SOURCE_DIR}/tests/e2e --build-dir ${PROJECT_BINARY_DIR})
  set_tests_properties(e2e PROPERTIES LABELS e2e TIMEOUT 900)

  # The same scenarios with the daemon under valgrind memcheck: zero errors,
  # zero bytes lost, no fd open at exit beyond stdio (ci/valgrind.py judges).
  find_program(SB_VALGRIND valgrind)
  if(SB_VALGRIND)
    add_test(NAME valgrind.e2e COMMAND ${SB_PYTHON} ${PROJECT_SOURCE_DIR}/ci/valgrind.py
             ${PROJECT_BINARY_DIR}/valgrind/e2e --
             ${SB_PYTHON} -m pytest -q -p no:cacheprovider -n 2
             ${PROJECT_SOURCE_DIR}/tests/e2e --build-dir ${PROJECT_BINARY_DIR})
    set_tests_properties(valgrind.e2e PROPERTIES LABELS valgrind TIMEOUT 1800)
  endif()
endif()

# The .deb of the kit: builds, resolves, and its suite passes against its daemon.
# The Python package: pip-installed offline in a venv, its command judges our daemon.
if(EXISTS ${PROJECT_SOURCE_DIR}/tests/package)
  add_test(NAME package.deb COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider
           ${PROJECT_SOURCE_DIR}/tests/package/test_deb.py --build-dir ${PROJECT_BINARY_DIR})
  set_tests_properties(package.deb PROPERTIES LABELS package TIMEOUT 900)
  sb_heavy(package.deb ${SB_LANE_A} 96)
  add_test(NAME package.pip COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider
           ${PROJECT_SOURCE_DIR}/tests/package/test_pip.py --build-dir ${PROJECT_BINARY_DIR})
  set_tests_properties(package.pip PROPERTIES LABELS package TIMEOUT 600)
  sb_heavy(package.pip ${SB_LANE_C} 41)
endif()

# ci/github-actions-example.yml, its run steps executed against a stand-in daemon.
if(EXISTS ${PROJECT_SOURCE_DIR}/tests/ci_example)
  add_test(NAME ci-example COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider
           ${PROJECT_SOURCE_DIR}/tests/ci_example --build-dir ${PROJECT_BINARY_DIR})
  set_tests_properties(ci-example PROPERTIES LABELS ci-example TIMEOUT 1200)
  sb_heavy(ci-example ${SB_LANE_B} 100)
endif()

# The worker-side suite on real MCP servers from npm (tests/interop, pinned by
# its package-lock.json, installed by ci/install-deps.sh), each held to a
# committed baseline of real defects. Without node_modules it skips, with the
# reason, unless CI is set.
if(EXISTS ${PROJECT_SOURCE_DIR}/tests/interop/test_interop.py)
  add_test(NAME interop COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider
           --ignore=${PROJECT_SOURCE_DIR}/tests/interop/acp --ignore=${PROJECT_SOURCE_DIR}/tests/interop/acp_corpus
           ${PROJECT_SOURCE_DIR}/tests/interop)
  set_tests_properties(interop PROPERTIES LABELS interop TIMEOUT 900
                       SKIP_REGULAR_EXPRESSION "[0-9]+ skipped in ")
  sb_heavy(interop ${SB_LANE_B} 52)
endif()

# Real MCP software through the daemon (issue 16): the pinned, unmodified
# SDK client and reference servers of tests/interop (ci/install-deps.sh runs
# its `npm ci`), in stdio, unix and TCP modes, with and without affinity.
find_program(SB_NODE node)
if(SB_NODE AND EXISTS ${PROJECT_SOURCE_DIR}/tests/interop/bus/bus.test.mjs)
  add_test(NAME interop.bus COMMAND ${SB_NODE} --test --test-concurrency=1
           ${PROJECT_SOURCE_DIR}/tests/interop/bus/bus.test.mjs)
  set_tests_properties(interop.bus PROPERTIES LABELS interop TIMEOUT 900
                       ENVIRONMENT STDIO_BUS=$<TARGET_FILE:stdio_bus>)
endif()

# The user-level benchmark's smoke (bench/users, issue 26): MCP SDK clients
# through our daemon (unix, TCP; per_connection, affinity), supergateway,
# mcp-proxy and directly, two clients at once; correctness only (each answer
# once, to its own client, unchanged), no timing judged. Exit 77 (skipped)
# without bench/users/node_modules, unless CI is set.
if(SB_NODE AND EXISTS ${PROJECT_SOURCE_DIR}/bench/users/smoke.sh)
  add_test(NAME bench.users.smoke COMMAND ${PROJECT_SOURCE_DIR}/bench/users/smoke.sh
           $<TARGET_FILE:stdio_bus>)
  set_tests_properties(bench.users.smoke PROPERTIES LABELS bench-smoke TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endif()

# ACP agents through the daemon (issue 23): the pinned, unmodified ACP SDK on
# both ends (tests/interop/acp, its own package-lock.json), in stdio, unix and
# TCP modes, compared with the client spawning the agent, with closing
# mid-turn, reconnect and churn (issue 23 items 1 and 2, SB-X-19..SB-X-21).
# Lane c: it judges no time (the closing-mid-turn times are measure.py's).
if(EXISTS ${PROJECT_SOURCE_DIR}/tests/interop/acp/test_acp_bus.py)
  add_test(NAME interop.acp COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider -n 2
           ${PROJECT_SOURCE_DIR}/tests/interop/acp)
  set_tests_properties(interop.acp PROPERTIES LABELS interop TIMEOUT 2400
                       ENVIRONMENT STDIO_BUS=$<TARGET_FILE:stdio_bus>
                       SKIP_REGULAR_EXPRESSION "[0-9]+ skipped in ")
  sb_heavy(interop.acp ${SB_LANE_C} 324)
endif()

# The acp profile on published ACP agents nobody here wrote (issue 35): no
# description, no credentials, offline (tests/interop/acp_corpus, its own
# package-lock.json), each held to a hand-classified baseline. Lane c: it
# measures no time, and its agents wait on the suite's answer deadline.
if(EXISTS ${PROJECT_SOURCE_DIR}/tests/interop/acp_corpus/test_acp_corpus.py)
  add_test(NAME interop.acp-corpus COMMAND ${SB_PYTHON} -m pytest -q -p no:cacheprovider -n 2
           ${PROJECT_SOURCE_DIR}/tests/interop/acp_corpus)
  set_tests_properties(interop.acp-corpus PROPERTIES LABELS interop TIMEOUT 900
                       SKIP_REGULAR_EXPRESSION "[0-9]+ skipped in ")
  sb_heavy(interop.acp-corpus ${SB_LANE_C} 88)
endif()

if(EXISTS ${PROJECT_SOURCE_DIR}/conformance/CMakeLists.txt)
  include(${PROJECT_SOURCE_DIR}/conformance/CMakeLists.txt)
endif()
