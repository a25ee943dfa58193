# The Debian package, built by CPack from the normal build (docs/install.md):
#   cmake --build --preset <p> --target gpuledger gpuledger_man && (cd build/<p> && cpack -G DEB)
# Installs /usr/bin/gpuledger, its manual page (generated from --help), the systemd units
# of the agent and the server, example configs under /etc/gpuledger (conffiles), and
# maintainer scripts that make the `gpuledger` system user and /var/lib/gpuledger.
include(GNUInstallDirs)

# `install` (and so cpack) installs what is built, without building everything first:
# the packaging test reuses the binary of the normal build.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

set(_pkg ${PROJECT_SOURCE_DIR}/packaging)
set(_man ${PROJECT_BINARY_DIR}/man/gpuledger.1.gz)
add_custom_command(
  OUTPUT ${_man}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
  COMMAND sh ${_pkg}/manpage.sh $<TARGET_FILE:gpuledger> ${PROJECT_VERSION} ${_man}
  DEPENDS gpuledger ${_pkg}/manpage.sh
  COMMENT "gpuledger.1 from --help"
  VERBATIM)
add_custom_target(gpuledger_man DEPENDS ${_man})

set(_changelog ${PROJECT_BINARY_DIR}/packaging/changelog.gz)
add_custom_command(
  OUTPUT ${_changelog}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/packaging
  COMMAND sh -c "gzip -9n < '${_pkg}/deb/changelog' > '${_changelog}'"
  DEPENDS ${_pkg}/deb/changelog
  COMMENT "changelog.gz"
  VERBATIM)
add_dependencies(gpuledger_man gpuledger_changelog)
add_custom_target(gpuledger_changelog DEPENDS ${_changelog})

install(TARGETS gpuledger RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${_pkg}/deb/copyright ${_changelog} DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/deploy/gpuledger-agent.service ${PROJECT_SOURCE_DIR}/deploy/gpuledger-server.service
        DESTINATION /lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/agent.toml ${PROJECT_SOURCE_DIR}/deploy/server.toml
        DESTINATION /etc/gpuledger)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpuledger)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU cost ledger: node agent, server, reports and simulator")
set(CPACK_PACKAGE_DESCRIPTION
    "gpuledger attributes every GPU-second of a fleet to jobs, teams and
projects, and prices it. The one binary is the node agent (NVML
telemetry, process-to-job attribution from Slurm, Kubernetes and mapping
files, a dcgm-exporter compatible /metrics), the server (ingest, the
ledger on SQLite, the JSON API and dashboard), the reports and the
cluster simulator.")
set(CPACK_PACKAGE_CONTACT "gpuledger maintainers <gpuledger@example.org>")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${_pkg}/deb/postinst;${_pkg}/deb/prerm;${_pkg}/deb/postrm;${_pkg}/deb/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Lintian wants 0755 folders and 0644 files whatever the build machine's umask.
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
include(CPack)

# The package test (label `package`; run it last: it packs the built binary): cpack,
# lintian, then the extracted binary's `demo --once`.
if(GPULEDGER_BUILD_TESTS)
  add_test(NAME package_deb
           COMMAND sh ${_pkg}/package_test.sh ${PROJECT_BINARY_DIR} ${CMAKE_COMMAND})
  set_tests_properties(package_deb PROPERTIES LABELS "package;slow" TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
