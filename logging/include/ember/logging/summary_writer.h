// defines: SummaryWriter, TensorBoard's event files written as PyTorch's torch.utils.tensorboard.SummaryWriter
// writes them, so `tensorboard --logdir runs` shows Ember's runs beside PyTorch's:
//
//   ember::SummaryWriter w("runs/mnist");
//   w.add_scalar("loss/train", loss, step);
//   w.add_scalars("loss", {{"train", 0.31}, {"test", 0.35}}, epoch);  // one curve per key, one chart
//   w.add_histogram("fc1/weight", model.fc1->weight, epoch);
//   w.add_text("config", "Adam lr 1e-3, batch 64", 0);
//   w.close();  // (the destructor closes too)
//
// One file per writer, logdir/events.out.tfevents.<seconds>.<host>.<pid>.<n>; add_scalars writes each key's curve
// into its own folder logdir/<main_tag>_<key>/, as PyTorch does. Records are buffered and flushed by flush(),
// close(), and every `flush_every` records. Errors (a folder that cannot be made or written) are IOError naming the
// path; nothing is left half written: a record is written whole or not at all.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ember/core/tensor.h"

namespace ember {

struct SummaryWriterOptions {
  std::string filename_suffix;  // appended to the event file's name
  int flush_every = 10;         // records kept in memory before they are written (1: each at once)
};

class SummaryWriter {
 public:
  // Makes logdir (and its parents) if needed and opens a new event file in it.
  explicit SummaryWriter(const std::string& logdir, SummaryWriterOptions opts = {});
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // A point of the curve `tag` (stored as float32, as TensorBoard does).
  void add_scalar(const std::string& tag, double value, int64_t step);
  // Several curves in one chart: each key's value goes to logdir/<main_tag>_<key>/ under the tag main_tag.
  void add_scalars(const std::string& main_tag, const std::map<std::string, double>& values, int64_t step);
  // The distribution of a tensor's values (any device and real dtype; NaN and infinities are refused, as PyTorch's),
  // in `bins` equal-width buckets between its min and max.
  void add_histogram(const std::string& tag, const Tensor& values, int64_t step, int bins = 64);
  // Text (markdown) shown in TensorBoard's text tab.
  void add_text(const std::string& tag, const std::string& text, int64_t step);
  void flush();
  void close();  // flushes and closes every file; later calls throw ValueError; safe to call twice

  const std::string& logdir() const { return logdir_; }
  const std::string& file_path() const;  // this writer's event file

 private:
  class EventFile;
  EventFile& file();
  EventFile& scalars_file(const std::string& main_tag, const std::string& key);

  std::string logdir_;
  SummaryWriterOptions opts_;
  std::unique_ptr<EventFile> file_;
  std::map<std::string, std::unique_ptr<EventFile>> scalars_files_;  // add_scalars' folders, by folder
  bool closed_ = false;
};

}  // namespace ember
