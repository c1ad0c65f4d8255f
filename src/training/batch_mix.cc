#include "batch_mix.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "tandem/common/error.h"
#include "tandem/data/core/rng.h"

namespace tandem::training {
namespace {

// Beta(alpha, alpha) as torch's Dirichlet([alpha, alpha])[0]: normalised gamma draws.
double sample_beta(data::Rng& rng, double alpha) {
  const double a = data::sample_gamma(rng, alpha);
  const double b = data::sample_gamma(rng, alpha);
  if (a + b == 0) return rng.below(2) == 0 ? 0.0 : 1.0;  // both underflowed (a tiny alpha): all weight on one
  return a / (a + b);
}

// torchvision's RandomCutmix box: centre uniform over the image, half-sides
// int(0.5 sqrt(1 - lam) x side), clipped; lam becomes the share of the area left alone.
void place_box(data::Rng& rng, int64_t height, int64_t width, MixDraw& d) {
  const auto cx = static_cast<int64_t>(rng.below(static_cast<uint64_t>(width)));
  const auto cy = static_cast<int64_t>(rng.below(static_cast<uint64_t>(height)));
  const double r = 0.5 * std::sqrt(1.0 - d.lam);
  const auto half_w = static_cast<int64_t>(r * static_cast<double>(width));
  const auto half_h = static_cast<int64_t>(r * static_cast<double>(height));
  d.x0 = std::max<int64_t>(cx - half_w, 0);
  d.y0 = std::max<int64_t>(cy - half_h, 0);
  d.x1 = std::min(cx + half_w, width);
  d.y1 = std::min(cy + half_h, height);
  d.lam = 1.0 - static_cast<double>((d.x1 - d.x0) * (d.y1 - d.y0)) / static_cast<double>(width * height);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace

MixDraw draw_mix(const MixOptions& o, int64_t step, int rank, int64_t height, int64_t width) {
  MixDraw d;
  if (o.mixup <= 0 && o.cutmix <= 0) return d;
  data::Rng rng(o.seed, data::kMixStream, static_cast<uint64_t>(step), static_cast<uint64_t>(rank));
  const bool cutmix = o.mixup > 0 && o.cutmix > 0 ? rng.below(2) == 1 : o.cutmix > 0;
  d.kind = cutmix ? MixDraw::Kind::kCutmix : MixDraw::Kind::kMixup;
  d.lam = sample_beta(rng, cutmix ? o.cutmix : o.mixup);
  if (cutmix) place_box(rng, height, width, d);
  return d;
}

torch::Tensor soft_targets(const torch::Tensor& labels, int64_t classes, double lam, double smoothing) {
  const torch::Tensor onehot = torch::nn::functional::one_hot(labels, classes).to(torch::kFloat32);
  torch::Tensor t = lam == 1.0 ? onehot : onehot * lam + onehot.roll(1, 0) * (1.0 - lam);
  if (smoothing > 0) t = t * (1.0 - smoothing) + smoothing / static_cast<double>(classes);
  return t;
}

torch::Tensor mix_images(const torch::Tensor& x, const MixDraw& d) {
  if (d.kind == MixDraw::Kind::kNone) return x;
  const torch::Tensor rolled = x.roll(1, 0);
  torch::Tensor out;
  if (d.kind == MixDraw::Kind::kMixup) {
    out = x * d.lam + rolled * (1.0 - d.lam);
  } else {
    out = x.clone();
    const auto box = [&](const torch::Tensor& t) {
      return t.narrow(2, d.y0, d.y1 - d.y0).narrow(3, d.x0, d.x1 - d.x0);
    };
    box(out).copy_(box(rolled));
  }
  return out.contiguous(x.suggest_memory_format());
}

MixedBatch mix_batch(const torch::Tensor& x, const torch::Tensor& labels, const MixOptions& o, int64_t step, int rank,
                     int64_t classes) {
  const int64_t height = x.dim() == 4 ? x.size(2) : 1, width = x.dim() == 4 ? x.size(3) : 1;
  const MixDraw d = draw_mix(o, step, rank, height, width);
  return {mix_images(x, d), soft_targets(labels, classes, d.lam, o.label_smoothing)};
}

void check_mixing(const MixOptions& o, Model& model, const data::DatasetInfo& info, const std::string& model_name) {
  if (!o.soft_targets()) return;
  if (model.has_training_step()) {
    throw ConfigError("--mixup, --cutmix and --label-smoothing apply to classification models (image + label), but "
                      "--model " + model_name + " trains through training_step on the batch's fields: mix or smooth "
                      "inside training_step and leave these flags at 0");
  }
  if (o.cutmix > 0 && info.sample_shape.size() != 3) {
    throw ConfigError("--cutmix pastes a box of one image into another and needs images shaped [C, H, W], but "
                      "dataset " + info.name + "'s samples are shaped " + shape_text(info.sample_shape) +
                      ": use --mixup instead, or no --cutmix");
  }
  model.check_soft_targets(info.num_classes);
}

}  // namespace tandem::training
