# Install layout and the packages: the Debian package (cpack -G DEB) and the RPM (cpack -G RPM; Debian's
# `rpm` package provides rpmbuild). `make release` (scripts/make-release.sh, docs/release.md) makes both and
# the tarball into dist/.
#
#   bin/gpudx                          the binary (libstdc++ and libgcc linked statically: depends on glibc only)
#   lib/gpudx/libgpudx_shim.so         the preload library (docs/shim.md)
#   share/gpudx/xid-policy.toml        the Xid policy as shipped: a template for --xid-policy. The binary
#                                      carries the same policy compiled in, so it needs no data file.
#   share/man/man1/gpudx.1.gz          the manual page
#   share/doc/gpudx/                   README and docs; examples/ (Slurm prolog, epilog, health check,
#                                      matrix), examples/kubernetes and examples/systemd (deploy/)
#
# `cmake --install build --prefix /usr/local` installs it; `cpack --config build/CPackConfig.cmake -G DEB`
# builds gpudx_<version>_amd64.deb and `-G RPM` gpudx-<version>-1.x86_64.rpm, both with prefix /usr.

install(TARGETS gpudx RUNTIME DESTINATION bin)
if(TARGET gpudx_shim)
  install(TARGETS gpudx_shim LIBRARY DESTINATION lib/gpudx)
endif()
install(DIRECTORY data/ DESTINATION share/gpudx)

# Debian wants manual pages compressed; done at configure time (raw gzip stream), redone when the page changes.
set(GPUDX_MAN_SOURCE ${CMAKE_SOURCE_DIR}/docs/gpudx.1)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${GPUDX_MAN_SOURCE})
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/man)
file(ARCHIVE_CREATE OUTPUT ${CMAKE_BINARY_DIR}/man/gpudx.1.gz PATHS ${GPUDX_MAN_SOURCE}
     FORMAT raw COMPRESSION GZip)
install(FILES ${CMAKE_BINARY_DIR}/man/gpudx.1.gz DESTINATION share/man/man1)

install(FILES README.md DESTINATION share/doc/gpudx)
install(DIRECTORY docs/ DESTINATION share/doc/gpudx/docs
        FILES_MATCHING PATTERN "*.md" PATTERN "device-runs" EXCLUDE)
install(DIRECTORY examples/ DESTINATION share/doc/gpudx/examples
        USE_SOURCE_PERMISSIONS PATTERN "*.sh" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
        GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
install(DIRECTORY deploy/ DESTINATION share/doc/gpudx/examples)

set(GPUDX_PACKAGE_MAINTAINER "gpudx maintainers <gpudx@localhost>" CACHE STRING
    "Maintainer field of the Debian package (Name <email>)")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpudx)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "find where a GPU node's stack is broken, by UUID and PCI address")
set(CPACK_PACKAGE_DESCRIPTION
    "gpudx walks the layers of a multi-GPU Linux server bottom-up (PCIe, kernel module, kernel log,
libraries, device nodes, NVML/CUDA driver, container, job allocation), names the failure boundary and
every GPU by UUID and PCI address, and integrates with Slurm (health check, drain, prolog records),
Prometheus (node_exporter textfile), Kubernetes (node-problem-detector) and systemd.
The NVIDIA libraries are loaded at run time; no CUDA toolkit is needed.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES TRUE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GPUDX_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# libstdc++ and libgcc are linked statically and the NVIDIA libraries are dlopen'ed: glibc is the only
# dependency. dpkg-shlibdeps (dpkg-dev) computes its minimum version when present.
find_program(GPUDX_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(GPUDX_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6")
endif()
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurmd, prometheus-node-exporter")

# The RPM, for RHEL, Rocky and Alma 8 and 9, SUSE: rpmbuild's automatic requirements name only glibc's
# libraries (libc.so.6, libm.so.6, libpthread.so.0, libdl.so.2 with their GLIBC_2.x versions), which any
# glibc 2.28 or newer provides. The manual-page folders belong to the distribution's filesystem package.
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_GROUP "Applications/System")
set(CPACK_RPM_PACKAGE_ARCHITECTURE x86_64)
set(CPACK_RPM_PACKAGE_AUTOREQ ON)
set(CPACK_RPM_PACKAGE_AUTOPROV OFF)  # the shim is preloaded by path, never linked against
set(CPACK_RPM_PACKAGE_SUGGESTS "slurm-slurmd, node_exporter")
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION /usr/share/man /usr/share/man/man1)
include(CPack)
