# Installs the already-built ember from BIN into a fresh prefix under WORK, then configures, builds and runs
# examples/consumer against it with nothing but CMAKE_PREFIX_PATH — what a user's project does. Then checks
# that neither the consumer nor libember links a CUDA library (ELF NEEDED entries), and, when the CUDA plugin is
# installed, that the consumer still starts and trains with the plugin removed.
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BIN} --prefix ${WORK}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC}/examples/consumer -B ${WORK}/build -G ${GEN}
                        -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer against the installed ember failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer failed (${rc})")
endif()

function(run_consumer what)
  execute_process(COMMAND ${WORK}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "consumer (${what}) printed: ${out}${err}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "consumer ok")
    message(FATAL_ERROR "the consumer did not run correctly (${what}): exit ${rc}")
  endif()
  set(consumer_out "${out}" PARENT_SCOPE)
endfunction()
run_consumer("as installed")

# No CUDA library in the NEEDED entries of the consumer or of libember (the plugin is opened at run time).
file(GLOB libember ${WORK}/prefix/lib*/libember.so)
foreach(elf ${WORK}/build/consumer ${libember})
  execute_process(COMMAND readelf -d ${elf} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${elf} failed (${rc})")
  endif()
  string(REGEX MATCHALL "NEEDED[^\n]*" needed "${dyn}")
  message(STATUS "${elf}: ${needed}")
  if(needed MATCHES "cuda|cublas|cudnn|nccl")
    message(FATAL_ERROR "${elf} links a CUDA library: ${needed}")
  endif()
endforeach()

# With the plugin gone (a machine with no CUDA libraries at all), the consumer still trains on the CPU and says why
# CUDA is unavailable.
file(GLOB plugin ${WORK}/prefix/lib*/libember_cuda.so)
if(plugin)
  file(RENAME ${plugin} ${plugin}.removed)
  run_consumer("CUDA plugin removed")
  file(RENAME ${plugin}.removed ${plugin})
  if(NOT consumer_out MATCHES "cuda: unavailable \\(the CUDA backend \\(libember_cuda.so\\) could not be loaded")
    message(FATAL_ERROR "without the plugin the consumer should report that it could not be loaded")
  endif()
endif()
