// defines: ember::Error and its subclasses (ShapeError, DeviceError, DTypeError, IndexError, ValueError,
// OutOfMemoryError, IOError, InternalError); EMBER_CHECK* macros that build messages with an ostream fold.
// Every user-facing check names the op, shapes, dtypes and devices involved.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ShapeError : public Error {
 public:
  using Error::Error;
};
class DeviceError : public Error {
 public:
  using Error::Error;
};
class DTypeError : public Error {
 public:
  using Error::Error;
};
class IndexError : public Error {
 public:
  using Error::Error;
};
class ValueError : public Error {
 public:
  using Error::Error;
};
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};
class IOError : public Error {
 public:
  using Error::Error;
};
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... A>
std::string str(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}
template <class E>
[[noreturn]] void fail(std::string msg) {
  throw E(std::move(msg));
}
}  // namespace detail
}  // namespace ember

#define EMBER_CHECK(cond, ErrT, ...) \
  do { \
    if (!(cond)) [[unlikely]] \
      ::ember::detail::fail<ErrT>(::ember::detail::str(__VA_ARGS__)); \
  } while (0)
#define EMBER_CHECK_SHAPE(cond, ...) EMBER_CHECK(cond, ::ember::ShapeError, __VA_ARGS__)
#define EMBER_CHECK_DEVICE(cond, ...) EMBER_CHECK(cond, ::ember::DeviceError, __VA_ARGS__)
#define EMBER_CHECK_DTYPE(cond, ...) EMBER_CHECK(cond, ::ember::DTypeError, __VA_ARGS__)
#define EMBER_CHECK_INDEX(cond, ...) EMBER_CHECK(cond, ::ember::IndexError, __VA_ARGS__)
#define EMBER_CHECK_VALUE(cond, ...) EMBER_CHECK(cond, ::ember::ValueError, __VA_ARGS__)
#define EMBER_INTERNAL_ASSERT(cond, ...) \
  EMBER_CHECK(cond, ::ember::InternalError, "internal error (please report): ", #cond, " at ", __FILE__, ":", \
              __LINE__, " " __VA_OPT__(, ) __VA_ARGS__)
