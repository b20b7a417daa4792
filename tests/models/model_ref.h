// defines: what the model parity tests share: running the reference implementation (tests/models/ref.py in the
// venv of `make models-ref`; the test skips with that hint when it is absent) and comparing tensors by their largest
// error relative to the reference's largest magnitude.
#pragma once
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "test_util.h"

namespace models_test {

namespace fs = std::filesystem;

// The venv's python: $EMBER_MODELS_REF_PYTHON, else ~/.cache/ember/models-ref/bin/python; "" when neither exists.
inline std::string reference_python() {
  if (const char* p = std::getenv("EMBER_MODELS_REF_PYTHON"); p && fs::exists(p)) return p;
  const char* home = std::getenv("HOME");
  const fs::path venv = fs::path(home ? home : "/root") / ".cache/ember/models-ref/bin/python";
  return fs::exists(venv) ? venv.string() : "";
}

// Runs ref.py for `what` into a fresh folder and returns it; "" with *why_not set when there is no reference (or,
// for a full-size model, in a sanitizer build, where its forward takes minutes).
inline std::string run_reference(const std::string& what, std::string* why_not) {
#ifdef EMBER_SANITIZER_BUILD
  if (what.size() > 5 && what.compare(what.size() - 5, 5, "-full") == 0) {
    *why_not = "full-size models run in the normal build only (an instrumented Debug build takes minutes)";
    return "";
  }
#endif
  const std::string py = reference_python();
  if (py.empty()) {
    *why_not = "the reference implementations are not installed: run `make models-ref` (torch, timm, transformers "
               "from PyPI in ~/.cache/ember/models-ref)";
    return "";
  }
  const fs::path dir = ember::test::tmpdir("models_ref_" + what);
  const fs::path log = dir / "ref.log";
  const std::string cmd = py + " " + EMBER_MODELS_TEST_DIR + "/ref.py " + what + " " + dir.string() + " > " +
                          log.string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::string text;
    if (FILE* f = std::fopen(log.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
      std::fclose(f);
    }
    ADD_FAILURE() << "the reference failed: " << cmd << "\n" << text;
    return "";
  }
  return dir.string();
}

inline std::map<std::string, ember::Tensor> read_all(const std::string& path) {
  std::map<std::string, ember::Tensor> out;
  for (const auto& [n, t] : ember::nn::load_tensors(path)) out.emplace(n, t);
  return out;
}

// max |a - b| / max |b| (b the reference), in float64 (a reference of zeros counts as 1e-9).
inline double relative_error(const ember::Tensor& a, const ember::Tensor& b) {
  const ember::Tensor x = a.detach().to(ember::kFloat64).cpu(), y = b.detach().to(ember::kFloat64).cpu();
  const double scale = std::max(ember::abs(y).max().item<double>(), 1e-9);
  return ember::abs(x - y).max().item<double>() / scale;
}

// Expects a and b of one shape within `tol` relative (see relative_error).
inline ::testing::AssertionResult close(const ember::Tensor& a, const ember::Tensor& b, double tol) {
  if (!a.defined() || !b.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure() << "shape " << a.shape() << " vs the reference's " << b.shape();
  const double e = relative_error(a, b);
  if (e <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative error " << e << " > " << tol;
}

}  // namespace models_test
