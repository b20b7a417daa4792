// defines: the public einsum of ops.h, mapped onto permute, reshape, sum and matmul, so that autograd differentiates
// it (twice) and every device runs it with kernels it already has. After parsing, each operand's indices that
// nothing else needs are summed away; the operands are then contracted left to right, each pair as one batched
// matmul ([batch..., M, K] @ [batch..., K, N]); a final permute puts the output indices in order.
#include <algorithm>
#include <string>
#include <vector>

#include "ember/autograd/ops.h"
#include "grad_utils.h"

namespace ember {

namespace {

// Indices are numbered: 'A'-'Z' 0-25 and 'a'-'z' 26-51 (so their order is the alphabetical one of an implicit
// output), then the dims an ellipsis stands for, right-aligned across operands as in broadcasting.
constexpr int kLetters = 52;

std::string index_name(int label) {
  if (label >= kLetters) return "... dim " + std::to_string(label - kLetters);
  return std::string("'") + static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)) + "'";
}

// One side of the equation's terms: its indices, and where its ellipsis stood (-1: none).
struct Term {
  std::vector<int> labels;
  int ellipsis_at = -1;
};

Term parse_term(const std::string& eq, const std::string& text) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= 'A' && c <= 'Z') {
      t.labels.push_back(c - 'A');
    } else if (c >= 'a' && c <= 'z') {
      t.labels.push_back(26 + (c - 'a'));
    } else if (c == '.') {
      EMBER_CHECK_VALUE(text.compare(i, 3, "...") == 0 && t.ellipsis_at < 0, opdef::einsum.name,
                        ": a '.' that is not part of one "
                        "ellipsis \"...\" per term in \"",
                        eq, "\"");
      t.ellipsis_at = static_cast<int>(t.labels.size());
      i += 2;
    } else {
      EMBER_CHECK_VALUE(false, opdef::einsum.name, ": invalid character '", c, "' in \"", eq,
                        "\" (indices are letters)");
    }
  }
  return t;
}

// The term's labels with its ellipsis expanded to `count` of the `total` ellipsis labels (the last ones).
std::vector<int> expand(const Term& t, int64_t count, int64_t total) {
  std::vector<int> out(t.labels.begin(), t.labels.end());
  if (t.ellipsis_at < 0) return out;
  std::vector<int> dots;
  for (int64_t k = total - count; k < total; ++k) dots.push_back(kLetters + static_cast<int>(k));
  out.insert(out.begin() + t.ellipsis_at, dots.begin(), dots.end());
  return out;
}

bool has(const std::vector<int>& v, int label) { return std::find(v.begin(), v.end(), label) != v.end(); }

// A tensor with one label per dim.
struct Labelled {
  Tensor t;
  std::vector<int> labels;
  int64_t size(int label) const { return t.size(std::find(labels.begin(), labels.end(), label) - labels.begin()); }
};

// Sums away the dims whose label is not in `keep`.
Labelled sum_except(Labelled a, const std::vector<int>& keep) {
  std::vector<int64_t> dims;
  std::vector<int> kept;
  for (size_t d = 0; d < a.labels.size(); ++d) {
    if (has(keep, a.labels[d])) {
      kept.push_back(a.labels[d]);
    } else {
      dims.push_back(static_cast<int64_t>(d));
    }
  }
  if (!dims.empty()) a.t = sum(a.t, dims);
  a.labels = kept;
  return a;
}

// x's dims in the order of `labels` (each one of x's labels).
Tensor arrange(const Labelled& x, const std::vector<int>& labels) {
  std::vector<int64_t> perm;
  bool identity = true;
  for (int l : labels) {
    perm.push_back(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
    identity = identity && perm.back() == static_cast<int64_t>(perm.size() - 1);
  }
  return identity ? x.t : x.t.permute(perm);
}

int64_t product(const Labelled& x, const std::vector<int>& labels) {
  int64_t p = 1;
  for (int l : labels) p *= x.size(l);
  return p;
}

// a and b contracted over their shared labels that are not in `keep`, as one batched matmul: shared labels in keep
// are batch dims, the others are each operand's own rows and columns. Labels of one operand only are all in keep
// (sum_except has run).
Labelled contract(Labelled a, Labelled b, const std::vector<int>& keep) {
  std::vector<int> batch, summed, rows, cols;
  for (int l : a.labels) {
    if (!has(b.labels, l)) {
      rows.push_back(l);
    } else if (has(keep, l)) {
      batch.push_back(l);
    } else {
      summed.push_back(l);
    }
  }
  for (int l : b.labels)
    if (!has(a.labels, l)) cols.push_back(l);
  // A summed index of size 1 in one operand (broadcast) is summed in the other one first.
  for (int l : summed) {
    if (a.size(l) == b.size(l)) continue;
    Labelled& big = a.size(l) == 1 ? b : a;
    const int64_t d = std::find(big.labels.begin(), big.labels.end(), l) - big.labels.begin();
    big.t = sum(big.t, {d}, /*keepdim=*/true);
  }
  Shape a_shape, b_shape, out_shape;
  for (int l : batch) {
    a_shape.push_back(a.size(l));
    b_shape.push_back(b.size(l));
    out_shape.push_back(std::max(a.size(l), b.size(l)));  // 1 and n broadcast
  }
  const int64_t m = product(a, rows), k = product(a, summed), n = product(b, cols);
  a_shape.push_back(m);
  a_shape.push_back(k);
  b_shape.push_back(k);
  b_shape.push_back(n);
  std::vector<int> a_order = batch, b_order = batch;
  a_order.insert(a_order.end(), rows.begin(), rows.end());
  a_order.insert(a_order.end(), summed.begin(), summed.end());
  b_order.insert(b_order.end(), summed.begin(), summed.end());
  b_order.insert(b_order.end(), cols.begin(), cols.end());
  Tensor c = matmul(arrange(a, a_order).reshape(a_shape), arrange(b, b_order).reshape(b_shape));
  Labelled out{Tensor(), batch};
  for (int l : rows) out_shape.push_back(a.size(l));
  for (int l : cols) out_shape.push_back(b.size(l));
  out.labels.insert(out.labels.end(), rows.begin(), rows.end());
  out.labels.insert(out.labels.end(), cols.begin(), cols.end());
  out.t = c.reshape(out_shape);
  return out;
}

// The operand terms of "lhs1,lhs2,...->rhs" (spaces removed), one per operand.
std::vector<Term> parse_terms(const std::string& equation, const std::string& lhs, size_t n_operands) {
  std::vector<Term> terms;
  for (size_t at = 0;;) {
    const size_t comma = lhs.find(',', at);
    terms.push_back(parse_term(equation, lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  EMBER_CHECK_VALUE(terms.size() == n_operands, opdef::einsum.name, ": \"", equation, "\" has ", terms.size(),
                    " operand terms but ", n_operands, " operands were given");
  return terms;
}

// The operands with their labels (each ellipsis expanded to the dims its subscripts leave over, `dots` of them at
// most), in one promoted dtype; `sizes` gets each label's size, checked to agree (or broadcast) across operands.
struct LabelledOperands {
  std::vector<Labelled> ops;
  std::vector<int64_t> sizes;  // by label; -1: not seen
  int64_t dots = 0;
};
LabelledOperands label_operands(const std::string& equation, const std::vector<Term>& terms,
                                const std::vector<Tensor>& operands) {
  LabelledOperands r;
  std::vector<int64_t> counts;
  for (size_t i = 0; i < terms.size(); ++i) {
    const int64_t named = static_cast<int64_t>(terms[i].labels.size()), rank = operands[i].dim();
    EMBER_CHECK_SHAPE(terms[i].ellipsis_at >= 0 ? rank >= named : rank == named, opdef::einsum.name, ": operand ", i,
                      " ", operands[i].dtype(), operands[i].shape(), " has ", rank, " dims but its subscripts in \"",
                      equation, "\" name ", named, terms[i].ellipsis_at >= 0 ? " (and an ellipsis)" : "");
    counts.push_back(terms[i].ellipsis_at >= 0 ? rank - named : 0);
    r.dots = std::max(r.dots, counts.back());
  }
  DType dt = operands[0].dtype();
  for (const Tensor& t : operands) dt = promote_types(dt, t.dtype());
  r.sizes.assign(static_cast<size_t>(kLetters + r.dots), -1);
  for (size_t i = 0; i < terms.size(); ++i) {
    Labelled op{operands[i].to(dt), expand(terms[i], counts[i], r.dots)};
    for (size_t d = 0; d < op.labels.size(); ++d) {
      const int l = op.labels[d];
      EMBER_CHECK_VALUE(std::count(op.labels.begin(), op.labels.end(), l) == 1, opdef::einsum.name, ": index ",
                        index_name(l), " is repeated in operand ", i, " of \"", equation,
                        "\"; diagonals are not supported");
      int64_t& s = r.sizes[static_cast<size_t>(l)];
      const int64_t here = op.t.size(static_cast<int64_t>(d));
      EMBER_CHECK_SHAPE(s < 0 || s == here || s == 1 || here == 1, opdef::einsum.name, ": index ", index_name(l),
                        " has size ", s, " in an earlier operand but ", here, " in operand ", i, " ", op.t.dtype(),
                        op.t.shape(), " of \"", equation, "\"");
      if (s < 0 || s == 1) s = here;
    }
    r.ops.push_back(op);
  }
  return r;
}

// The output's labels: those of rhs when the equation has one (arrow != npos), else the ellipsis then every index
// used once, in alphabetical order.
std::vector<int> output_labels(const std::string& equation, const std::string& eq, size_t arrow,
                               const LabelledOperands& in) {
  std::vector<int> out;
  if (arrow != std::string::npos) {
    const Term rhs = parse_term(equation, eq.substr(arrow + 2));
    out = expand(rhs, in.dots, in.dots);
    for (int l : rhs.labels) {
      EMBER_CHECK_VALUE(std::count(out.begin(), out.end(), l) == 1, opdef::einsum.name, ": output index ",
                        index_name(l), " appears more than once in \"", equation, "\"");
      EMBER_CHECK_VALUE(in.sizes[static_cast<size_t>(l)] >= 0, opdef::einsum.name, ": output index ", index_name(l),
                        " appears in no operand of \"", equation, "\"");
    }
    return out;
  }
  for (int64_t k = 0; k < in.dots; ++k) out.push_back(kLetters + static_cast<int>(k));
  for (int l = 0; l < kLetters; ++l) {
    int uses = 0;
    for (const Labelled& op : in.ops) uses += static_cast<int>(has(op.labels, l));
    if (uses == 1) out.push_back(l);
  }
  return out;
}

// Sums what no one else needs, contracts left to right, orders the output.
Tensor evaluate(const std::vector<Labelled>& ops, const std::vector<int>& out) {
  auto needed_after = [&](size_t i) {  // the output's labels and those of operands after i
    std::vector<int> keep = out;
    for (size_t j = i + 1; j < ops.size(); ++j) keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
    return keep;
  };
  Labelled acc = sum_except(ops[0], needed_after(0));
  for (size_t i = 1; i < ops.size(); ++i) {
    std::vector<int> keep = needed_after(i);
    std::vector<int> mine = keep;
    mine.insert(mine.end(), acc.labels.begin(), acc.labels.end());
    acc = contract(acc, sum_except(ops[i], mine), keep);
  }
  return arrange(acc, out);
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands_in) {
  OpEntry entry(opdef::einsum);
  EMBER_CHECK_VALUE(!operands_in.empty(), entry.name(), ": expected at least one operand for \"", equation, "\"");
  for (const Tensor& t : operands_in) autograd::check_defined(entry.name(), t, "operands[i]");
  std::vector<Tensor> operands;  // autocast: the products in float16 / bfloat16
  for (const Tensor& t : operands_in) operands.push_back(entry.in(t));
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");  // "lhs1,lhs2,...->rhs"; the arrow and rhs are optional
  EMBER_CHECK_VALUE(arrow == std::string::npos || eq.find("->", arrow + 2) == std::string::npos, entry.name(),
                    ": more than one \"->\" in \"", equation, "\"");
  const std::vector<Term> terms = parse_terms(equation, eq.substr(0, arrow), operands.size());
  const LabelledOperands in = label_operands(equation, terms, operands);
  return evaluate(in.ops, output_labels(equation, eq, arrow, in));
}

}  // namespace ember
