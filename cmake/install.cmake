# SPDX-License-Identifier: Apache-2.0
# What `cmake --install` puts in place, and the Debian package CPack makes of it
# (scripts/package.sh): the binary, the ScopedMount header with a CMake package
# (find_package(mimicfs), target mimicfs::scoped_mount), the docs and a man page.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS mimicfs RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set_target_properties(mimicfs_scoped_mount PROPERTIES EXPORT_NAME scoped_mount)
install(TARGETS mimicfs_scoped_mount EXPORT mimicfsTargets)
install(FILES include/mimicfs/scoped_mount.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mimicfs)
set(MIMICFS_CMAKE_DIR ${CMAKE_INSTALL_DATADIR}/cmake/mimicfs)  # header only: arch-independent
install(EXPORT mimicfsTargets NAMESPACE mimicfs:: DESTINATION ${MIMICFS_CMAKE_DIR})
configure_package_config_file(cmake/mimicfsConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/mimicfsConfig.cmake
  INSTALL_DESTINATION ${MIMICFS_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mimicfsConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mimicfsConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/mimicfsConfigVersion.cmake DESTINATION ${MIMICFS_CMAKE_DIR})

# Debian's places for the license (copyright, machine-readable) and the upstream
# changelog (changelog.gz); the man page is gzipped too, as Debian policy asks.
find_program(GZIP gzip REQUIRED)
add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/changelog.gz
  COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_SOURCE_DIR}/CHANGELOG.md
    ${CMAKE_CURRENT_BINARY_DIR}/changelog
  COMMAND ${GZIP} -9nf ${CMAKE_CURRENT_BINARY_DIR}/changelog
  DEPENDS ${PROJECT_SOURCE_DIR}/CHANGELOG.md VERBATIM)
add_custom_target(mimicfs_changelog ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/changelog.gz)
install(FILES cmake/copyright ${CMAKE_CURRENT_BINARY_DIR}/changelog.gz
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

install(FILES README.md docs/architecture.md docs/conformance.md docs/cookbook.md
  docs/design.md docs/performance.md docs/profiles.md docs/stats.md docs/time.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The man page, from the binary's own --help (help2man; scripts/package.sh installs it).
find_program(HELP2MAN help2man)
if(HELP2MAN)
  add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/mimicfs.1.gz
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr
      --name "emulated storage (NFS, ext4, xfs, btrfs) for database tests, as a FUSE filesystem"
      --include ${PROJECT_SOURCE_DIR}/cmake/mimicfs.h2m
      --output ${CMAKE_CURRENT_BINARY_DIR}/mimicfs.1 $<TARGET_FILE:mimicfs>
    COMMAND ${GZIP} -9nf ${CMAKE_CURRENT_BINARY_DIR}/mimicfs.1
    DEPENDS mimicfs ${PROJECT_SOURCE_DIR}/cmake/mimicfs.h2m
    VERBATIM)
  # A page per command, from `mimicfs COMMAND --help`, with its exit statuses,
  # environment and examples (cmake/man/COMMAND.h2m).
  set(pages ${CMAKE_CURRENT_BINARY_DIR}/mimicfs.1.gz)
  set(name_mount "mount an emulated volume (NFS, ext4, xfs, btrfs) on an empty directory")
  set(name_run "run a command on a temporary emulated volume")
  set(name_crashtest "cut the power at many points of a workload and check the volume after each")
  set(name_stats "print a mounted volume's statistics")
  set(name_ctl "send a command to a mounted volume: crashes, faults, syncs, latency")
  set(name_report "draw a mounted volume's device layout as SVG")
  set(name_profiles "list the built-in profiles, or show one")
  set(name_completion "print a bash completion script for mimicfs")
  foreach(command mount run crashtest stats ctl report profiles completion)
    set(page ${CMAKE_CURRENT_BINARY_DIR}/mimicfs-${command}.1)
    add_custom_command(OUTPUT ${page}.gz
      COMMAND ${HELP2MAN} --no-info --no-discard-stderr
        --help-option "${command} --help"
        --version-string "mimicfs-${command} ${PROJECT_VERSION}"
        --name "${name_${command}}"
        --include ${PROJECT_SOURCE_DIR}/cmake/man/${command}.h2m
        --include ${PROJECT_SOURCE_DIR}/cmake/man/see_also.h2m
        --output ${page} $<TARGET_FILE:mimicfs>
      COMMAND ${GZIP} -9nf ${page}
      DEPENDS mimicfs ${PROJECT_SOURCE_DIR}/cmake/man/${command}.h2m
        ${PROJECT_SOURCE_DIR}/cmake/man/see_also.h2m
      VERBATIM)
    list(APPEND pages ${page}.gz)
  endforeach()
  add_custom_target(mimicfs_man ALL DEPENDS ${pages})
  install(FILES ${pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

# Bash completion, from the command line's own definitions.
add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/mimicfs.bash
  COMMAND $<TARGET_FILE:mimicfs> completion bash > ${CMAKE_CURRENT_BINARY_DIR}/mimicfs.bash
  DEPENDS mimicfs
  VERBATIM)
add_custom_target(mimicfs_completion ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/mimicfs.bash)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mimicfs.bash
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/bash-completion/completions RENAME mimicfs)

set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)  # the binary without its debug sections (a tenth of the size)
set(CPACK_PACKAGE_NAME mimicfs)
set(CPACK_PACKAGE_VENDOR "mimicfs")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "emulated storage (NFS, ext4, xfs, btrfs) for database tests, as a FUSE filesystem")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "mimicfs developers <mimicfs@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # mimicfs_VERSION_ARCH.deb
# The shared libraries' packages from dpkg-shlibdeps, and fusermount3.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "fuse3")
# What find_package(mimicfs) and ScopedMount need, installed by default with
# the package (apt installs Recommends) and left out with --no-install-recommends
# on a machine that only mounts.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "nlohmann-json3-dev, cmake")
include(CPack)
