// SSD_MPI_CHECK(call): runs an MPI call and throws ssd::Error with MPI's own description, the
// call and its location when it does not return MPI_SUCCESS. The communicators this project
// creates use MPI_ERRORS_RETURN, so errors come back here instead of aborting inside MPI.
#pragma once

#include <mpi.h>

#include <string>

namespace ssd {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

}  // namespace ssd

#define SSD_MPI_CHECK(call)                                                          \
  do {                                                                               \
    const int ssd_mpi_rc_ = (call);                                                  \
    if (ssd_mpi_rc_ != MPI_SUCCESS)                                                  \
      ::ssd::throw_mpi_error(ssd_mpi_rc_, #call, __FILE__, __LINE__);                \
  } while (0)
