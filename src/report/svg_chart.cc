#include "tandem/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tandem/plan/planner.h"

namespace tandem::report {

namespace {

constexpr int kLeft = 70, kRight = 18, kTop = 14, kBottom = 46;
constexpr const char* kAccent = "#d9480f";
constexpr size_t kMaxPoints = 800;  // longer series are thinned evenly: a page, not a data dump

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t utf8_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size() || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4)) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return 0;
  }
  return n;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// Tick labels with as many decimals as the tick spacing needs.
std::string tick_label(double v, double step) {
  const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return html_escape(plan::group_thousands(v, decimals));
}

struct Frame {
  double x0, x1, y0, y1;  // data ranges
  int w, h;
  double px(double x) const { return kLeft + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (w - kLeft - kRight); }
  double py(double y) const { return h - kBottom - (y1 > y0 ? (y - y0) / (y1 - y0) : 0) * (h - kTop - kBottom); }
};

std::vector<size_t> thinned(size_t n) {
  std::vector<size_t> idx;
  const size_t stride = n > kMaxPoints ? (n + kMaxPoints - 1) / kMaxPoints : 1;
  for (size_t i = 0; i < n; i += stride) idx.push_back(i);
  if (!idx.empty() && idx.back() != n - 1) idx.push_back(n - 1);
  return idx;
}

std::string axes(const Chart& c, Frame& f, bool category_x) {
  std::string out;
  const std::vector<double> yt = nice_ticks(f.y0, f.y1, 5);
  f.y1 = std::max(f.y1, yt.back());
  const double ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double t : yt) {
    out += "<line class=\"grid\" x1=\"" + fmt(kLeft) + "\" x2=\"" + fmt(f.w - kRight) + "\" y1=\"" + fmt(f.py(t)) +
           "\" y2=\"" + fmt(f.py(t)) + "\"/>";
    out += "<text class=\"tick\" x=\"" + fmt(kLeft - 6) + "\" y=\"" + fmt(f.py(t) + 4) + "\" text-anchor=\"end\">" +
           tick_label(t, ystep) + "</text>";
  }
  if (category_x) {
    for (double x : c.series[0].x) {
      out += "<text class=\"tick\" x=\"" + fmt(f.px(x)) + "\" y=\"" + fmt(f.h - kBottom + 16) +
             "\" text-anchor=\"middle\">" + tick_label(x, 1) + "</text>";
    }
  } else {
    const std::vector<double> xt = nice_ticks(f.x0, f.x1, 6);
    const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1;
    for (double t : xt) {
      if (t < f.x0 - 1e-9 * std::fabs(f.x1 - f.x0) || t > f.x1 + 1e-9 * std::fabs(f.x1 - f.x0)) continue;
      out += "<line class=\"tickmark\" x1=\"" + fmt(f.px(t)) + "\" x2=\"" + fmt(f.px(t)) + "\" y1=\"" +
             fmt(f.h - kBottom) + "\" y2=\"" + fmt(f.h - kBottom + 4) + "\"/>";
      out += "<text class=\"tick\" x=\"" + fmt(f.px(t)) + "\" y=\"" + fmt(f.h - kBottom + 16) +
             "\" text-anchor=\"middle\">" + tick_label(t, xstep) + "</text>";
    }
  }
  out += "<line class=\"axis\" x1=\"" + fmt(kLeft) + "\" x2=\"" + fmt(f.w - kRight) + "\" y1=\"" + fmt(f.h - kBottom) +
         "\" y2=\"" + fmt(f.h - kBottom) + "\"/>";
  out += "<line class=\"axis\" x1=\"" + fmt(kLeft) + "\" x2=\"" + fmt(kLeft) + "\" y1=\"" + fmt(kTop) + "\" y2=\"" +
         fmt(f.h - kBottom) + "\"/>";
  out += "<text class=\"label\" x=\"" + fmt((kLeft + f.w - kRight) / 2.0) + "\" y=\"" + fmt(f.h - 8) +
         "\" text-anchor=\"middle\">" + html_escape(c.x_label) + "</text>";
  out += "<text class=\"label\" transform=\"translate(14," + fmt((kTop + f.h - kBottom) / 2.0) +
         ") rotate(-90)\" text-anchor=\"middle\">" + html_escape(c.y_label) + "</text>";
  return out;
}

std::string lines(const Chart& c, const Frame& f) {
  std::string out;
  for (size_t s = 0; s < c.series.size(); ++s) {
    const Series& se = c.series[s];
    std::string d;
    size_t drawn = 0;
    for (size_t i : thinned(se.x.size())) {
      if (!std::isfinite(se.x[i]) || !std::isfinite(se.y[i])) continue;
      d += (d.empty() ? "M" : " L") + fmt(f.px(se.x[i])) + "," + fmt(f.py(se.y[i]));
      ++drawn;
    }
    out += "<path class=\"line\" fill=\"none\" stroke=\"" + std::string(series_color(s)) + "\" d=\"" + d + "\"/>";
    if (drawn > 40) continue;  // dots only where they help: few points, or one
    for (size_t i = 0; i < se.x.size(); ++i) {
      if (!std::isfinite(se.x[i]) || !std::isfinite(se.y[i])) continue;
      out += "<circle r=\"3\" fill=\"" + std::string(series_color(s)) + "\" cx=\"" + fmt(f.px(se.x[i])) + "\" cy=\"" +
             fmt(f.py(se.y[i])) + "\"/>";
    }
  }
  return out;
}

std::string stacked(const Chart& c, const Frame& f) {
  const size_t n = c.series[0].x.size();
  const std::vector<size_t> idx = thinned(n);
  std::vector<double> below(n, 0.0);
  std::string out;
  const double bar = std::max(4.0, (f.w - kLeft - kRight) / (n * 1.5));
  for (size_t s = 0; s < c.series.size(); ++s) {
    const Series& se = c.series[s];
    std::vector<double> top(n);
    for (size_t i = 0; i < n; ++i) top[i] = below[i] + (std::isfinite(se.y[i]) ? std::max(0.0, se.y[i]) : 0.0);
    const std::string color = series_color(s);
    if (n == 1) {  // one point: a bar, since an area needs two
      out += "<rect fill=\"" + color + "\" x=\"" + fmt(f.px(se.x[0]) - bar / 2) + "\" y=\"" + fmt(f.py(top[0])) +
             "\" width=\"" + fmt(bar) + "\" height=\"" + fmt(f.py(below[0]) - f.py(top[0])) + "\"/>";
    } else {
      std::string pts;
      for (size_t i : idx) pts += fmt(f.px(se.x[i])) + "," + fmt(f.py(top[i])) + " ";
      for (auto it = idx.rbegin(); it != idx.rend(); ++it) pts += fmt(f.px(se.x[*it])) + "," + fmt(f.py(below[*it])) + " ";
      out += "<polygon class=\"area\" fill=\"" + color + "\" points=\"" + pts + "\"/>";
    }
    below = top;
  }
  return out;
}

std::string bars(const Chart& c, const Frame& f) {
  const Series& se = c.series[0];
  const double slot = (f.w - kLeft - kRight) / (f.x1 - f.x0);
  std::string out;
  for (size_t i = 0; i < se.x.size(); ++i) {
    if (!std::isfinite(se.y[i])) continue;
    const double x = f.px(se.x[i]), w = std::max(2.0, slot * 0.6);
    out += "<rect fill=\"" + std::string(static_cast<int>(i) == c.highlight ? kAccent : series_color(0)) + "\" x=\"" +
           fmt(x - w / 2) + "\" y=\"" + fmt(f.py(se.y[i])) + "\" width=\"" + fmt(w) + "\" height=\"" +
           fmt(f.py(f.y0) - f.py(se.y[i])) + "\"><title>" + tick_label(se.x[i], 1) + ": " +
           html_escape(plan::group_thousands(se.y[i], 4)) + "</title></rect>";
  }
  return out;
}

std::string legend(const Chart& c) {
  if (c.series.size() < 2) return "";
  std::string out = "<div class=\"legend\">";
  for (size_t s = 0; s < c.series.size(); ++s) {
    out += "<span><i style=\"background:" + std::string(series_color(s)) + "\"></i>" + html_escape(c.series[s].name) +
           "</span>";
  }
  return out + "</div>";
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_length(s, i);
    const auto c = static_cast<unsigned char>(s[i]);
    if (n == 0 || (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (hi - lo <= 0) hi = lo + (lo == 0 ? 1.0 : std::fabs(lo) * 0.1);
  const double raw = (hi - lo) / std::max(1, target), mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::floor(lo / step) * step; ticks.size() < 100; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
    if (t >= hi - step * 1e-9) break;
  }
  return ticks;
}

const char* series_color(size_t i) {
  static const char* const kPalette[] = {"#1c7ed6", "#f08c00", "#2f9e44", "#ae3ec9", "#e03131", "#0c8599", "#868e96", "#5c940d"};
  return kPalette[i % (sizeof kPalette / sizeof kPalette[0])];
}

std::string render_chart(const Chart& c) {
  Frame f{0, 0, c.y_min, c.y_max_at_least, c.width, c.height};
  bool any = false, first = true;
  const bool is_stacked = c.kind == Chart::Kind::kStackedAreas;
  std::vector<double> totals(c.series.empty() ? 0 : c.series[0].x.size(), 0.0);
  for (const Series& se : c.series) {
    for (size_t i = 0; i < se.x.size() && i < se.y.size(); ++i) {
      if (!std::isfinite(se.x[i]) || !std::isfinite(se.y[i])) continue;
      f.x0 = first ? se.x[i] : std::min(f.x0, se.x[i]);
      f.x1 = first ? se.x[i] : std::max(f.x1, se.x[i]);
      first = false;
      any = true;
      if (is_stacked && i < totals.size()) totals[i] += std::max(0.0, se.y[i]);
      else f.y1 = std::max(f.y1, se.y[i]);
    }
  }
  if (!any) return "<p class=\"nodata\">no data for this chart</p>";
  for (double t : totals) f.y1 = std::max(f.y1, t);
  if (c.kind == Chart::Kind::kBars || f.x0 == f.x1) {  // room for a bar or a lone point at either end
    f.x0 -= 0.5;
    f.x1 += 0.5;
  }
  if (f.y1 <= f.y0) f.y1 = f.y0 + 1;
  std::string body = axes(c, f, c.kind == Chart::Kind::kBars);
  body += c.kind == Chart::Kind::kLines ? lines(c, f) : is_stacked ? stacked(c, f) : bars(c, f);
  return "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(c.width) +
         "\" height=\"" + std::to_string(c.height) + "\" viewBox=\"0 0 " + std::to_string(c.width) + " " +
         std::to_string(c.height) + "\" role=\"img\" aria-label=\"" + html_escape(c.y_label) + " against " +
         html_escape(c.x_label) + "\">" + body + "</svg>" + legend(c);
}

}  // namespace tandem::report
