#include "tandem/launch/run_settings.h"

#include "tandem/data/sources/source_kinds.h"

namespace tandem::launch {

namespace {

bool is_python(const data::DatasetInfo& info) { return info.description.rfind("python/", 0) == 0; }

// A Python dataset by its file and class, with its fields and arguments:
// "my_data.py:Flowers (fields image:uint8[3,64,64],label:int64; args {"size":64})".
std::string python_dataset_name(const data::DatasetInfo& info) {
  const std::string fields = data::description_setting(info.description, "fields");
  const std::string args = data::description_setting(info.description, "args");
  return data::description_setting(info.description, "file") + ":" + data::description_setting(info.description, "name") +
         " (fields " + (fields.empty() ? "unknown" : fields) + (args.empty() || args == "{}" ? "" : "; args " + args) + ")";
}

// The pipeline as the dataset ran it (its description's "pipeline=..."), or what was asked.
std::string pipeline_run(const DataOptions& d, const data::DatasetInfo& info) {
  if (const std::string ran = data::description_setting(info.description, "pipeline"); !ran.empty()) return ran;
  if (is_python(info)) {
    return "the dataset's own __getitem__" + (d.pipeline.empty() ? std::string() : ", then " + d.pipeline);
  }
  return d.pipeline.empty() ? "none (generated samples)" : d.pipeline;
}

// How the samples were made: tandem's C++ pipeline, a Python dataset made natively (a
// torchvision folder, tandem.Image files: "native=" in its description), with or without a
// Python part, or its own Python code (docs/datasets.md).
std::string made_by(const data::DatasetInfo& info) {
  const std::string native = data::description_setting(info.description, "native");
  const bool python_part = data::description_setting(info.description, "pipeline").find("python(") != std::string::npos;
  if (!is_python(info)) return python_part ? "in C++, then a python() step" : "in C++";
  if (native.empty()) return "by its own Python code";
  return "natively in C++ (" + native + ")" + (python_part ? ", transforms tandem has no step for in Python" : "");
}

nlohmann::json trainer_settings(const TrainerOptions& t) {
  return {{"optimizer", t.optimizer},
          {"lr", t.lr},
          {"lr_schedule", t.schedule},
          {"warmup_steps", t.warmup_steps},
          {"momentum", t.momentum},
          {"weight_decay", t.weight_decay},
          {"clip_grad_norm", t.clip_grad_norm},
          {"mixup", t.mixup},
          {"cutmix", t.cutmix},
          {"label_smoothing", t.label_smoothing},
          {"amp", t.amp},
          {"fused_optimizer", t.fused_optimizer}};
}

}  // namespace

nlohmann::json run_settings(const Settings& settings, const data::DatasetInfo& info, bool script) {
  const DataOptions& d = settings.data;
  nlohmann::json out = {{"data", d.data},
          {"dataset", is_python(info) ? python_dataset_name(info) : info.name},
          {"made", made_by(info)},
          {"dataset_size", info.size},
          {"image_size", info.sample_shape.size() == 3 ? info.sample_shape[2] : d.image_size},
          {"num_classes", info.num_classes},
          {"seed", d.seed},
          {"pipeline", pipeline_run(d, info)},
          {"wire_dtype", d.wire_dtype.empty() ? "the dataset's own" : d.wire_dtype}};
  const nlohmann::json trainer = trainer_settings(settings.trainer);
  for (const auto& [key, value] : trainer.items()) out[key] = script ? nlohmann::json() : value;
  return out;
}

}  // namespace tandem::launch
