# Writes OUT, a header defining SSD_GIT_COMMIT as the source tree's short commit, with "-dirty"
# when tracked files differ from it ("unknown" outside a git checkout). Run at every build (the
# ssd_git_commit target), so a report names the commit the binary was built from, not the one
# CMake was configured at; the file is rewritten only when the text changes, so an unchanged
# commit recompiles nothing.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT commit)
  set(commit unknown)
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SRC} RESULT_VARIABLE dirty
                  ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    set(commit "${commit}-dirty")
  endif()
endif()
set(text "#pragma once\n#define SSD_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
