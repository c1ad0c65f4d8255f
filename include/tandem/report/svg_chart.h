// Charts as inline SVG for the HTML report: drawn in C++, so the page needs no script and
// no network to view. Every text that reaches the SVG (titles, labels) is HTML-escaped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::report {

// `s` safe inside HTML text and attribute values: & < > " ' escaped; bytes that are not
// valid UTF-8 and control characters (other than tab and newline) become U+FFFD.
std::string html_escape(std::string_view s);

struct Series {
  std::string name;       // shown in the legend (escaped there)
  std::vector<double> x;  // REQUIRES: x.size() == y.size(); finite values (others are skipped)
  std::vector<double> y;
};

struct Chart {
  enum class Kind {
    kLines,         // one line per series, with dots where a series has few points
    kStackedAreas,  // series stacked on one another; REQUIRES: every series has the same x
    kBars,          // one bar per x of the first series; `highlight` picks one out
  };
  Kind kind = Kind::kLines;
  std::string x_label;         // with the unit, "elapsed (s)"
  std::string y_label;         // with the unit, "samples/s"
  std::vector<Series> series;
  double y_min = 0.0;          // the y axis starts here (charts of rates and times start at 0)
  double y_max_at_least = 0.0; // e.g. 1 for shares and accuracy, so a flat series is not the top
  int highlight = -1;          // kBars: the index of the bar drawn in the accent colour
  int width = 560, height = 260;
};

// The chart as an <svg> element with axes, ticks, gridlines and labels, followed by an
// HTML legend when there is more than one series. A chart with no finite points renders
// as a short "no data" note instead.
std::string render_chart(const Chart& chart);

// "Nice" tick values (1, 2, 2.5 or 5 times a power of ten) covering [lo, hi], about
// `target` of them. REQUIRES: lo <= hi, both finite.
std::vector<double> nice_ticks(double lo, double hi, int target);

// The fill colour of series `i` (a fixed palette that prints and reads in greyscale).
const char* series_color(size_t i);

}  // namespace tandem::report
