// defines: PhiloxState, Generator (a Philox random stream you own) and GeneratorScope (makes a generator the
// default of this thread for a while). The random creation functions draw from opts.generator when given, else
// from this thread's scoped generator when there is one, else from the global generator (manual_seed).
//
//   ember::Generator g(42);
//   auto a = ember::randn({3}, {.generator = &g});        // the same numbers on every run, whatever else draws
//   {
//     ember::GeneratorScope use(g);                       // randn / rand / dropout on this thread draw from g
//     auto b = ember::randn({3});
//   }
//
// Philox is counter-based: a draw reserves a range of 128-bit blocks (an offset) and element i of it depends only
// on (seed, offset, i). Reserving is one atomic step under a mutex, so one generator may be shared by threads,
// but then the order in which the threads draw decides who gets which numbers: give each thread (or each
// sample — the DataLoader does, see data/sample_rng.h) its own generator for reproducible results.
#pragma once
#include <cstdint>
#include <mutex>

namespace ember {

struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // in 128-bit blocks (4 outputs each)
  bool operator==(const PhiloxState&) const = default;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ULL) : state_{.seed = seed, .offset = 0} {}
  Generator(const Generator& other) : state_(other.state()) {}  // an independent copy of the stream position
  Generator& operator=(const Generator& other);

  void manual_seed(uint64_t seed);  // seed, offset 0
  uint64_t initial_seed() const;
  PhiloxState state() const;
  void set_state(const PhiloxState& s);
  // Reserves `blocks` 128-bit blocks and returns where they start.
  PhiloxState next(uint64_t blocks);

 private:
  mutable std::mutex mu_;
  PhiloxState state_;
};

// The global generator (what manual_seed, get_rng_state and set_rng_state act on).
Generator& default_generator();

// While alive, unqualified random draws on this thread (no opts.generator) use `g` instead of the global
// generator. Scopes nest (the innermost live one wins, whatever order they end in); `g` must outlive the scope. A
// null pointer scope restores the global generator.
class GeneratorScope {
 public:
  explicit GeneratorScope(Generator* g);
  explicit GeneratorScope(Generator& g) : GeneratorScope(&g) {}
  ~GeneratorScope();
  GeneratorScope(const GeneratorScope&) = delete;
  GeneratorScope& operator=(const GeneratorScope&) = delete;
};

// The generator an unqualified draw on this thread uses now: the innermost GeneratorScope's, else the global one.
Generator& current_generator();

}  // namespace ember
