// defines: the sample orders a DataLoader walks: sequential_order(n) and shuffled_order(n, seed, epoch), a
// permutation that depends only on (seed, epoch), never on threads or workers, and is the same on every
// platform (Fisher–Yates over std::mt19937_64, whose output the C++ standard fixes, with our own bounded draw,
// because std::uniform_int_distribution and std::shuffle differ between standard libraries).
#pragma once
#include <cstdint>
#include <vector>

namespace ember::data {

// 0, 1, ..., n-1.
std::vector<int64_t> sequential_order(int64_t n);
// A permutation of 0..n-1; a different one for each (seed, epoch).
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, uint64_t epoch);

}  // namespace ember::data
