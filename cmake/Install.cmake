# What `cmake --install` puts in place, whatever SB_TESTS says, and the Debian
# package of the whole kit (`cpack -G DEB` in the build tree).
#
#   bin/stdio_bus                          the daemon
#   bin/stdio-bus-conformance              the suite's command (run.py; the Python
#                                          package, conformance/pyproject.toml, gives the same)
#   libexec/stdio_bus/{mock_worker,ref_worker}
#   share/stdio_bus/conformance/           the suite, SPEC.md, WORKER_SPEC.md, VERSION
#   share/doc/stdio_bus/                   README, CHANGELOG, LICENSE, NOTICE
#
# An installed suite runs without the source tree: run.py finds SPEC.md next
# to itself and defaults to <prefix>/bin/stdio_bus and
# <prefix>/libexec/stdio_bus/mock_worker.

set(SB_SUITE_DIR ${CMAKE_INSTALL_DATADIR}/stdio_bus/conformance)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/conformance/
        DESTINATION ${SB_SUITE_DIR}
        USE_SOURCE_PERMISSIONS
        PATTERN "__pycache__" EXCLUDE
        PATTERN "*.pyc" EXCLUDE
        PATTERN "CMakeLists.txt" EXCLUDE
        PATTERN "mutants" EXCLUDE
        PATTERN "selftest" EXCLUDE
        PATTERN "foreign.toml" EXCLUDE
        PATTERN "*.egg-info" EXCLUDE
        # what `pip install ./conformance` leaves in the tree
        REGEX "/conformance/build(/|$)" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/SPEC.md ${PROJECT_SOURCE_DIR}/WORKER_SPEC.md
              ${PROJECT_SOURCE_DIR}/VERSION
        DESTINATION ${SB_SUITE_DIR})

# The command on PATH: a two-line script, so it works from any prefix.
file(RELATIVE_PATH SB_SUITE_FROM_BIN /${CMAKE_INSTALL_BINDIR} /${SB_SUITE_DIR})
configure_file(${PROJECT_SOURCE_DIR}/cmake/stdio-bus-conformance.in
               ${PROJECT_BINARY_DIR}/stdio-bus-conformance @ONLY)
install(PROGRAMS ${PROJECT_BINARY_DIR}/stdio-bus-conformance DESTINATION ${CMAKE_INSTALL_BINDIR})

install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
              ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/NOTICE
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# cpack -G DEB: one package, stdio-bus, with what the suite needs to run.
set(CPACK_PACKAGE_NAME stdio-bus)
set(CPACK_PACKAGE_VENDOR "stdio Bus conformance kit")
set(CPACK_PACKAGE_CONTACT "stdio Bus conformance kit maintainers <maintainers@stdio-bus.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "stdio Bus v${SB_SPEC_VERSION} reference daemon and conformance suite")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6 (>= 2.34), libcjson1 (>= 1.7.15), python3 (>= 3.11), python3-pytest, python3-pytest-xdist, python3-pytest-timeout")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "A single-threaded daemon that routes NDJSON / JSON-RPC messages between\nclients (stdio, Unix socket, TCP) and pools of worker processes (MCP, ACP),\nand a clause-by-clause conformance suite for any implementation of the\nstdio Bus specification, any worker and any MCP stdio server.")
include(CPack)
