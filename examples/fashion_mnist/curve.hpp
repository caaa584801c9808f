#pragma once
// The demo's learning curves (header-only, standard library only): one record per epoch, written as
// CSV and as a self-contained SVG picture to open in a browser (two panels: loss, accuracy %, train
// and test lines with a point per epoch, ticks, labels, a legend and a title).
//
//   std::vector<demo::EpochRecord> history;
//   history.push_back({epoch, train_loss, train_accuracy, test_loss, test_accuracy, seconds});
//   if (auto error = demo::write_svg("curve.svg", history, "Fashion-MNIST LeNet"); !error.empty()) ...
//
// Accuracies are fractions (0..1), drawn as percentages. A NaN value (say, an epoch without a test
// pass) is written as "nan" in the CSV and left out of the picture. The writers return an empty
// string on success, else the reason (they never throw for I/O and never abort).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace demo {

struct EpochRecord {
  int epoch;              // 1-based
  double train_loss;      // mean training loss over the epoch
  double train_accuracy;  // 0..1
  double test_loss;
  double test_accuracy;  // 0..1
  double seconds;        // the epoch's wall time
};

namespace curve_detail {

__attribute__((format(printf, 2, 3))) inline void appendf(std::string& out, const char* format, ...) {
  std::va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(n) + 1);
    std::vsnprintf(out.data() + at, static_cast<std::size_t>(n) + 1, format, again);
    out.resize(at + static_cast<std::size_t>(n));
  }
  va_end(again);
}

inline std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// Writes `text` to `path`; "" or the reason it failed.
inline std::string write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return "cannot open " + path + " for writing: " + std::strerror(errno);
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int saved = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote) return "cannot write " + path + ": " + std::strerror(saved);
  if (!closed) return "cannot write " + path + ": " + std::strerror(errno);
  return {};
}

// A value axis: its range, and ticks every `step` (1, 2, 2.5 or 5 times a power of ten).
struct Axis {
  double lo = 0, hi = 1, step = 1;
  int decimals = 0;  // for the tick labels
};

// About `target_ticks` nice ticks covering [lo, hi], the range widened out to whole ticks.
inline Axis nice_axis(double lo, double hi, int target_ticks) {
  if (!(hi > lo)) {  // one value (or none): a unit-wide range around it
    const double mid = std::isfinite(lo) ? lo : 0.0;
    const double half = mid == 0.0 ? 0.5 : std::abs(mid) * 0.1;
    lo = mid - half;
    hi = mid + half;
  }
  const double raw = (hi - lo) / std::max(1, target_ticks);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * power;
  for (const double m : {1.0, 2.0, 2.5, 5.0}) {
    if (m * power >= raw * 0.999) {
      step = m * power;
      break;
    }
  }
  Axis axis;
  axis.step = step;
  axis.lo = std::floor(lo / step + 1e-9) * step;
  axis.hi = std::ceil(hi / step - 1e-9) * step;
  const double digits = -std::floor(std::log10(step) + 1e-9);
  axis.decimals = std::clamp(static_cast<int>(digits) + (std::abs(step / power - 2.5) < 1e-6 ? 1 : 0), 0, 6);
  return axis;
}

// The multiples of axis.step within [axis.lo, axis.hi].
inline std::vector<double> ticks(const Axis& axis) {
  std::vector<double> out;
  const double eps = 1e-6 * axis.step;
  for (double k = std::ceil((axis.lo - eps) / axis.step); k * axis.step <= axis.hi + eps && out.size() < 100; ++k) {
    out.push_back(k * axis.step == 0 ? 0.0 : k * axis.step);  // no "-0"
  }
  return out;
}

struct Series {
  const char* name;
  const char* color;
  const char* dash;  // stroke-dasharray, "" for solid
  std::vector<double> x, y;
};

struct Panel {
  double left, top, width, height;  // the plot area
  Axis xaxis, yaxis;
  double px(double x) const { return left + (x - xaxis.lo) / (xaxis.hi - xaxis.lo) * width; }
  double py(double y) const { return top + height - (y - yaxis.lo) / (yaxis.hi - yaxis.lo) * height; }
};

inline void draw_panel(std::string& svg, const Panel& p, const char* heading, const char* ylabel,
                       std::span<const Series> series) {
  // Grid lines and y ticks.
  for (const double value : ticks(p.yaxis)) {
    const double y = p.py(value);
    appendf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>\n", p.left, y,
            p.left + p.width, y);
    appendf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", p.left - 5, y, p.left, y);
    appendf(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">%.*f</text>\n",
            p.left - 8, y, p.yaxis.decimals, value);
  }
  // x ticks (epochs).
  for (const double value : ticks(p.xaxis)) {
    const double x = p.px(value);
    const double bottom = p.top + p.height;
    if (x > p.left + 1 && x < p.left + p.width - 1) {
      appendf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#f0f0f0\"/>\n", x, p.top, x, bottom);
    }
    appendf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", x, bottom, x, bottom + 5);
    appendf(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.*f</text>\n", x, bottom + 20, p.xaxis.decimals,
            value);
  }
  // Axes, labels, heading.
  appendf(svg, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n", p.left,
          p.top, p.width, p.height);
  appendf(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">epoch</text>\n", p.left + p.width / 2,
          p.top + p.height + 40);
  appendf(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
          p.left - 52, p.top + p.height / 2, p.left - 52, p.top + p.height / 2, ylabel);
  appendf(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
          p.left + p.width / 2, p.top - 10, heading);
  // The series: a polyline through the finite points (broken at gaps), and a point per epoch.
  svg += "<g>\n";
  for (const Series& s : series) {
    std::string points;
    auto flush = [&] {
      if (points.empty()) return;
      appendf(svg, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s points=\"", s.color,
              *s.dash ? " stroke-dasharray=\"" : "", s.dash, *s.dash ? "\"" : "");
      svg += points;
      svg += "\"/>\n";
      points.clear();
    };
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) {
        flush();
        continue;
      }
      appendf(points, "%s%.1f,%.1f", points.empty() ? "" : " ", p.px(s.x[i]), p.py(s.y[i]));
    }
    flush();
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      appendf(svg,
              "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"1\">"
              "<title>%s, epoch %g: %.4f</title></circle>\n",
              p.px(s.x[i]), p.py(s.y[i]), s.color, s.name, s.x[i], s.y[i]);
    }
  }
  svg += "</g>\n";
}

}  // namespace curve_detail

/// The CSV text: a header line, then one line per record (accuracies as fractions, "nan" where unknown).
inline std::string curve_csv(std::span<const EpochRecord> records) {
  std::string csv = "epoch,train_loss,train_accuracy,test_loss,test_accuracy,seconds\n";
  for (const EpochRecord& r : records) {
    curve_detail::appendf(csv, "%d,%.6g,%.6g,%.6g,%.6g,%.3f\n", r.epoch, r.train_loss, r.train_accuracy, r.test_loss,
                          r.test_accuracy, r.seconds);
  }
  return csv;
}

/// Writes curve_csv(records) to `path`: "" on success, else the reason.
inline std::string write_csv(const std::string& path, std::span<const EpochRecord> records) {
  return curve_detail::write_file(path, curve_csv(records));
}

/// The SVG text: `title` on top, a legend (train solid, test dashed), a loss panel and an accuracy (%) panel.
inline std::string curve_svg(std::span<const EpochRecord> records, std::string_view title) {
  using namespace curve_detail;
  constexpr double kWidth = 960, kHeight = 460;
  std::vector<double> epochs;
  Series loss[2] = {{"train loss", "#1f77b4", "", {}, {}}, {"test loss", "#d62728", "6 4", {}, {}}};
  Series accuracy[2] = {{"train accuracy", "#1f77b4", "", {}, {}}, {"test accuracy", "#d62728", "6 4", {}, {}}};
  for (const EpochRecord& r : records) {
    for (Series* s : {&loss[0], &loss[1], &accuracy[0], &accuracy[1]}) s->x.push_back(r.epoch);
    loss[0].y.push_back(r.train_loss);
    loss[1].y.push_back(r.test_loss);
    accuracy[0].y.push_back(100.0 * r.train_accuracy);
    accuracy[1].y.push_back(100.0 * r.test_accuracy);
  }
  // Ranges over the finite values.
  auto range = [](std::span<const Series> series, double& lo, double& hi) {
    lo = INFINITY;
    hi = -INFINITY;
    for (const Series& s : series) {
      for (const double v : s.y) {
        if (!std::isfinite(v)) continue;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    if (lo > hi) lo = hi = NAN;
  };
  double xlo = INFINITY, xhi = -INFINITY;
  for (const EpochRecord& r : records) {
    xlo = std::min<double>(xlo, r.epoch);
    xhi = std::max<double>(xhi, r.epoch);
  }
  if (records.empty()) xlo = xhi = 1;
  // Epoch axis: integer ticks, a little room either side so the end points clear the frame.
  Axis xaxis = nice_axis(xlo, xhi, 8);
  xaxis.step = std::max(1.0, std::round(xaxis.step));
  xaxis.decimals = 0;
  const double pad = xhi - xlo < 1 ? 1.0 : std::max(0.3, 0.025 * (xhi - xlo));
  xaxis.lo = xlo - pad;
  xaxis.hi = xhi + pad;
  double llo, lhi, alo, ahi;
  range(loss, llo, lhi);
  range(accuracy, alo, ahi);
  // Value axes: 4% of room either side of the data, then out to the next tick.
  if (std::isfinite(llo)) {
    const double room = 0.04 * (lhi - llo);
    llo = llo >= 0 ? std::max(0.0, llo - room) : llo - room;  // not below 0 for non-negative losses
    lhi += room;
  }
  if (std::isfinite(alo)) {
    const double room = 0.04 * (ahi - alo);
    alo = alo >= 0 ? std::max(0.0, alo - room) : alo - room;  // within 0..100% when the data is
    ahi = ahi <= 100 ? std::min(100.0, ahi + room) : ahi + room;
  }
  Axis laxis = nice_axis(std::isfinite(llo) ? llo : 0.0, std::isfinite(lhi) ? lhi : 1.0, 6);
  Axis aaxis = nice_axis(std::isfinite(alo) ? alo : 0.0, std::isfinite(ahi) ? ahi : 100.0, 6);
  if (aaxis.hi > 100 && (!std::isfinite(ahi) || ahi <= 100)) aaxis.hi = 100;  // never past 100% unless the data is
  if (aaxis.lo < 0 && (!std::isfinite(alo) || alo >= 0)) aaxis.lo = 0;
  if (laxis.lo < 0 && (!std::isfinite(llo) || llo >= 0)) laxis.lo = 0;

  std::string svg;
  appendf(svg,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
          "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"13\" fill=\"#222\">\n",
          kWidth, kHeight, kWidth, kHeight);
  const std::string escaped = xml_escape(title);
  svg += "<title>" + escaped + "</title>\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  svg +=
      "<text x=\"480\" y=\"30\" text-anchor=\"middle\" font-size=\"19\" font-weight=\"bold\">" + escaped + "</text>\n";
  // A subtitle with the last epoch and the best test accuracy.
  if (!records.empty()) {
    const EpochRecord& last = records.back();
    const EpochRecord* best = nullptr;
    double total_seconds = 0;
    for (const EpochRecord& r : records) {
      if (std::isfinite(r.seconds)) total_seconds += r.seconds;
      if (std::isfinite(r.test_accuracy) && (best == nullptr || r.test_accuracy > best->test_accuracy)) best = &r;
    }
    std::string subtitle;
    auto pair = [&](const char* name, double loss, double accuracy) {
      appendf(subtitle, "%s loss ", name);
      appendf(subtitle, std::isfinite(loss) ? "%.4f" : "\xe2\x80\x93", loss);
      appendf(subtitle, ", acc ");
      appendf(subtitle, std::isfinite(accuracy) ? "%.2f%%" : "\xe2\x80\x93", 100.0 * accuracy);
    };
    appendf(subtitle, "epoch %d: ", last.epoch);
    pair("train", last.train_loss, last.train_accuracy);
    appendf(subtitle, " \xc2\xb7 ");
    pair("test", last.test_loss, last.test_accuracy);
    if (best != nullptr)
      appendf(subtitle, " \xc2\xb7 best test acc %.2f%% (epoch %d)", 100.0 * best->test_accuracy, best->epoch);
    appendf(subtitle, " \xc2\xb7 %.1f s", total_seconds);
    appendf(svg, "<text x=\"480\" y=\"52\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n", subtitle.c_str());
  } else {
    svg += "<text x=\"480\" y=\"52\" text-anchor=\"middle\" fill=\"#555\">no epochs recorded</text>\n";
  }
  // The legend, centred under the titles.
  {
    const double y = 78, x0 = 480 - 110;
    appendf(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n", x0,
            y, x0 + 30, y);
    appendf(svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#1f77b4\"/>\n", x0 + 15, y);
    appendf(svg, "<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"middle\">train</text>\n", x0 + 38, y);
    appendf(svg,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" stroke-width=\"2\" "
            "stroke-dasharray=\"6 4\"/>\n",
            x0 + 120, y, x0 + 150, y);
    appendf(svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#d62728\"/>\n", x0 + 135, y);
    appendf(svg, "<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"middle\">test</text>\n", x0 + 158, y);
  }
  const Panel left{80, 120, 360, 270, xaxis, laxis};
  const Panel right{80 + 360 + 120, 120, 360, 270, xaxis, aaxis};
  draw_panel(svg, left, "Loss", "cross-entropy loss", loss);
  draw_panel(svg, right, "Accuracy", "accuracy (%)", accuracy);
  svg += "</svg>\n";
  return svg;
}

/// Writes curve_svg(records, title) to `path`: "" on success, else the reason.
inline std::string write_svg(const std::string& path, std::span<const EpochRecord> records, std::string_view title) {
  return curve_detail::write_file(path, curve_svg(records, title));
}

}  // namespace demo
