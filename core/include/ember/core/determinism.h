// defines: use_deterministic_algorithms, PyTorch's switch (torch.use_deterministic_algorithms) for the kernels that
// have a faster path whose results may differ from run to run: with it on, those take their deterministic path
// (cuDNN's fused attention backward). Ember's own kernels are deterministic either way (fixed summation orders).
#pragma once

namespace ember {

// Off by default (as PyTorch); read at each op, so it can be switched between ops. Process-wide.
void use_deterministic_algorithms(bool enabled);
bool are_deterministic_algorithms_enabled();

}  // namespace ember
