#pragma once
// A one-line training progress bar for the demo (header-only, standard library + POSIX isatty).
//
//   demo::ProgressBar bar;                       // stdout; a terminal gets the live line
//   for each epoch e in 1..E, step s in 1..S:    // s = steps done in this epoch
//     bar.update(e, E, s, S, running_loss, running_accuracy, images_per_second);
//   bar.finish_epoch("test loss 0.3812  acc 86.41%");
//
// On a terminal, update() redraws one line in place ('\r', erase to the end of the line) at most
// ten times a second (and always for an epoch's first and last step); the step count s/S is
// followed by the running loss and accuracy, the speed and the epoch's ETA:
//   epoch 2/10 [████████▌           ] 1234/1875 loss 0.4123 acc 85.12% 5321 img/s ETA 00:07
// The bar is shortened, then dropped, to fit the terminal's width. finish_epoch() replaces the line
// with the epoch's summary and ends it. When the stream is not a terminal (a pipe, a file, a CI log)
// update() prints nothing and finish_epoch() prints the same one plain line per epoch:
//   epoch 2/10  loss 0.4123  acc 85.12%  5321 img/s  00:12  test loss 0.3812  acc 86.41%
// Accuracies are fractions (0..1), shown as percentages. The epoch clock starts at construction, at
// each finish_epoch() and at start_epoch(); the ETA (rest of the epoch) is its average step time so
// far times the steps left, and the epoch time in the summary runs to the epoch's last update().
// No allocation: lines are formatted into a fixed buffer.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>

#include <sys/ioctl.h>
#include <unistd.h>

namespace demo {

class ProgressBar {
 public:
  using Clock = std::chrono::steady_clock;

  /// automatic: the live line when `out` is a terminal (isatty), else plain lines.
  enum class Mode { automatic, live, plain };

  /// Draws on `out` (default stdout).
  explicit ProgressBar(std::FILE* out = stdout, Mode mode = Mode::automatic) : out_(out), epoch_start_(Clock::now()) {
    interactive_ = mode == Mode::automatic ? ::isatty(::fileno(out)) != 0 : mode == Mode::live;
  }

  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// True when updates redraw a terminal line; false when only one plain line per epoch is printed.
  bool interactive() const { return interactive_; }

  /// Restarts the epoch clock (the ETA and the epoch time count from here). Optional: the clock also
  /// starts at construction and at every finish_epoch().
  void start_epoch() {
    epoch_start_ = Clock::now();
    last_draw_ = Clock::time_point{};
    fresh_ = true;
  }

  /// Reports that `step` of `steps` steps of epoch `epoch` of `epochs` are done (both 1-based).
  void update(int epoch, int epochs, std::int64_t step, std::int64_t steps, double running_loss,
              double running_accuracy, double images_per_second) {
    if (!fresh_ && epoch != epoch_) start_epoch();  // finish_epoch() was skipped
    fresh_ = false;
    const Clock::time_point now = Clock::now();
    epoch_ = epoch;
    epochs_ = epochs;
    step_ = step;
    steps_ = steps;
    loss_ = running_loss;
    accuracy_ = running_accuracy;
    images_per_second_ = images_per_second;
    last_update_ = now;
    if (!interactive_) return;
    const bool edge = step <= 1 || step >= steps;
    if (!edge && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    draw(now);
  }

  /// Ends the epoch's line: "epoch e/E  loss ..  acc ..%  N img/s  mm:ss  <summary>" and a newline,
  /// replacing the live line on a terminal, or as the one plain line otherwise.
  void finish_epoch(std::string_view summary = {}) {
    const double seconds = fresh_ ? 0.0 : std::chrono::duration<double>(last_update_ - epoch_start_).count();
    std::size_t n = 0;
    if (interactive_) n = append(n, "\r\x1b[K");
    n = append(n, "epoch %d/%d  loss %.4f  acc %.2f%%  %.0f img/s  ", epoch_, epochs_, loss_, 100.0 * accuracy_,
               images_per_second_);
    n = append_time(n, seconds);
    if (!summary.empty()) n = append(n, "  %.*s", static_cast<int>(summary.size()), summary.data());
    n = append(n, "\n");
    std::fwrite(buffer_, 1, n, out_);
    std::fflush(out_);
    start_epoch();
  }

 private:
  static constexpr std::size_t kCapacity = 1024;
  static constexpr int kMaxBar = 30;
  static constexpr int kMinBar = 8;

  // printf-formats at buffer_[n], truncating at the capacity; returns the new length.
  __attribute__((format(printf, 3, 4))) std::size_t append(std::size_t n, const char* format, ...) {
    if (n >= kCapacity - 1) return n;
    std::va_list args;
    va_start(args, format);
    const int written = std::vsnprintf(buffer_ + n, kCapacity - n, format, args);
    va_end(args);
    if (written < 0) return n;
    return std::min(n + static_cast<std::size_t>(written), kCapacity - 1);
  }

  // mm:ss (minutes unbounded); "--:--" when unknown.
  std::size_t append_time(std::size_t n, double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return append(n, "--:--");
    const auto total = static_cast<long long>(seconds + 0.5);
    return append(n, "%02lld:%02lld", total / 60, total % 60);
  }

  int terminal_columns() const {
    winsize size{};
    if (::ioctl(::fileno(out_), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
    return 80;
  }

  void draw(Clock::time_point now) {
    // The text after the bar first, to know how much room the bar has.
    char tail[256];
    const double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
    const double eta = step_ > 0 ? elapsed / static_cast<double>(step_) * static_cast<double>(steps_ - step_) : -1.0;
    const long long eta_s = std::isfinite(eta) && eta >= 0 ? static_cast<long long>(eta + 0.5) : -1;
    int tail_len;
    if (eta_s >= 0) {
      tail_len = std::snprintf(tail, sizeof tail, " %lld/%lld loss %.4f acc %.2f%% %.0f img/s ETA %02lld:%02lld",
                               static_cast<long long>(step_), static_cast<long long>(steps_), loss_, 100.0 * accuracy_,
                               images_per_second_, eta_s / 60, eta_s % 60);
    } else {
      tail_len = std::snprintf(tail, sizeof tail, " %lld/%lld loss %.4f acc %.2f%% %.0f img/s ETA --:--",
                               static_cast<long long>(step_), static_cast<long long>(steps_), loss_, 100.0 * accuracy_,
                               images_per_second_);
    }
    tail_len = std::clamp(tail_len, 0, static_cast<int>(sizeof tail) - 1);
    char head[32];
    int head_len = std::snprintf(head, sizeof head, "epoch %d/%d", epoch_, epochs_);
    head_len = std::clamp(head_len, 0, static_cast<int>(sizeof head) - 1);

    // Bar width: what fits in the terminal (one column spare so the line never wraps), at most kMaxBar.
    const int columns = terminal_columns();
    const int room = columns - 1 - head_len - tail_len - 3;  // " [" and "]"
    const int width = std::min(kMaxBar, room);
    if (width < kMinBar) tail_len = std::clamp(columns - 1 - head_len, 0, tail_len);  // no bar; never wrap

    std::size_t n = append(0, "\r");
    n = append(n, "%.*s", head_len, head);
    if (width >= kMinBar) {
      const double fraction =
          steps_ > 0 ? std::clamp(static_cast<double>(step_) / static_cast<double>(steps_), 0.0, 1.0) : 0.0;
      const int eighths = static_cast<int>(fraction * width * 8 + 0.5);
      n = append(n, " [");
      static constexpr const char* kPartial[8] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
      int cells = 0;
      for (; cells < eighths / 8; ++cells) n = append(n, "█");
      if (cells < width && eighths % 8 != 0) {
        n = append(n, "%s", kPartial[eighths % 8]);
        ++cells;
      }
      for (; cells < width; ++cells) n = append(n, " ");
      n = append(n, "]");
    }
    n = append(n, "%.*s", tail_len, tail);
    n = append(n, "\x1b[K");
    std::fwrite(buffer_, 1, n, out_);
    std::fflush(out_);
  }

  std::FILE* out_;
  bool interactive_ = false;
  bool fresh_ = true;  // no update() since the epoch clock (re)started
  int epoch_ = 0, epochs_ = 0;
  std::int64_t step_ = 0, steps_ = 0;
  double loss_ = 0, accuracy_ = 0, images_per_second_ = 0;
  Clock::time_point epoch_start_, last_draw_{}, last_update_{};
  char buffer_[kCapacity] = {};
};

}  // namespace demo
