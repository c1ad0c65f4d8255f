#include "tandem/cli/options.h"

#include "tandem/transport/credentials.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "tandem/common/error.h"
#include "tandem/common/json_limits.h"
#include "tandem/common/python_literal.h"
#include "tandem/common/text.h"

namespace tandem::cli {
namespace {

// Numbers as a person writes them: 1, 0.5, 65535, 1e+09.
std::string plain(double v) { return fmt::format("{:.15g}", v); }

// A finite number in [lo, hi] (strictly above lo when `open_low`). CLI11's own ranges let
// NaN through and print their bounds as 0.000000 to 1.79e308. The upper bounds keep
// seconds and counts inside what tandem's clocks and integers hold.
CLI::Validator number_in(double lo, double hi, bool open_low) {
  const std::string desc = (open_low ? "(" : "[") + plain(lo) + " - " + plain(hi) + "]";
  return CLI::Validator(
      [lo, hi, open_low](std::string& text) -> std::string {
        double v = 0;
        size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) return "'" + printable(text, 40) + "' is not a number";
        if (!std::isfinite(v)) return "'" + printable(text, 40) + "' is not a finite number";
        if (v < lo || v > hi || (open_low && v == lo)) {
          return printable(text, 40) + " is out of range: use " + (open_low ? "more than " : "") + plain(lo) +
                 (open_low ? " and at most " : " to ") + plain(hi);
        }
        return "";
      },
      desc);
}

constexpr double kMaxNumber = 1e9;

// A whole number in [lo, hi] written in decimal. CLI11 reads unsigned options with
// strtoull, which takes "-5" as 18446744073709551611, a number past the type's end as its
// largest value, and "010" as octal; this refuses the first two with the range and
// rewrites the text to the plain decimal the conversion then reads.
CLI::Validator whole_number(uint64_t lo, uint64_t hi) {
  const std::string desc = "[" + std::to_string(lo) + " - " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        const std::string range = "use " + std::to_string(lo) + " to " + std::to_string(hi);
        const std::string_view digits = std::string_view(text).substr(text.rfind('+', 0) == 0 ? 1 : 0);
        const bool negative = !text.empty() && text[0] == '-';
        const std::string_view magnitude = negative ? std::string_view(text).substr(1) : digits;
        if (magnitude.empty() || magnitude.find_first_not_of("0123456789") != std::string_view::npos) {
          return "'" + printable(text, 40) + "' is not a whole number: " + range;
        }
        const bool zero = magnitude.find_first_not_of('0') == std::string_view::npos;
        if (negative && !zero) return printable(text, 40) + " is out of range: " + range;
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(magnitude.data(), magnitude.data() + magnitude.size(), v);
        if (ec != std::errc() || end != magnitude.data() + magnitude.size() || v < lo || v > hi) {
          return printable(text, 40) + " is out of range: " + range;
        }
        text = std::to_string(v);
        return "";
      },
      desc);
}

// Free text settings (paths, names, specs) are at most this long and plain UTF-8
// without control characters (a JSON --pipeline may span lines), so that every message
// that quotes one stays short and one line.
constexpr size_t kMaxTextBytes = 16384;

CLI::Validator plain_text() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.size() > kMaxTextBytes) {
          return "'" + printable(text, 40) + "' is longer than " + std::to_string(kMaxTextBytes) + " bytes";
        }
        const bool control = std::any_of(text.begin(), text.end(), [](char ch) {
          const auto c = static_cast<unsigned char>(ch);
          return (c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f;
        });
        if (control || !valid_utf8(text)) {
          return "'" + printable(text, 40) + "' holds a control character or a byte that is not UTF-8";
        }
        return "";
      },
      "");
}

// Every text option added to `app` after the first `before` takes only plain_text().
void limit_text(CLI::App& app, size_t before) {
  const std::vector<CLI::Option*> all = app.get_options([](const CLI::Option*) { return true; });
  for (size_t i = before; i < all.size(); ++i) {
    if (all[i]->get_type_name().rfind("TEXT", 0) == 0) all[i]->check(plain_text());
  }
}

}  // namespace

CLI::Validator positive() { return number_in(0, kMaxNumber, true); }
CLI::Validator non_negative() { return number_in(0, kMaxNumber, false); }
CLI::Validator in_range(double lo, double hi) { return number_in(lo, hi, false); }

void add_cluster_options(CLI::App& app, ClusterOptions& o) {
  const size_t before = app.get_options().size();
  app.add_option("--sagemaker-root", o.sagemaker_root,
                 "Root of input/config/*.json, input/data/<channel>, model, checkpoints, output/failure")
      ->envname("TANDEM_SAGEMAKER_ROOT")->capture_default_str()->group(kClusterGroup);
  app.add_option("--config", o.config_file, "JSON file of settings (keys are flag names without --)")
      ->check(CLI::ExistingFile)->group(kClusterGroup);
  // List options take one value per flag (allow_extra_args(false)): otherwise the words
  // after `--` (tandem launch -- COMMAND ARGS) are taken for more of the list's values.
  app.add_option("--trainer-group", o.trainer_groups, "Instance group that trains (repeatable)")
      ->allow_extra_args(false)->group(kClusterGroup);
  app.add_option("--worker-group", o.worker_groups, "Instance group that serves data (repeatable)")
      ->allow_extra_args(false)->group(kClusterGroup);
  app.add_option("--current-host", o.current_host, "This host's name, overriding discovery")->group(kClusterGroup);
  app.add_option("--host-map", o.host_map, "How to reach hosts: name=addr[:port],...")
      ->envname("TANDEM_HOST_MAP")->delimiter(',')->allow_extra_args(false)->group(kClusterGroup);
  app.add_option("--worker-port", o.worker_port, "Port data workers listen on")
      ->capture_default_str()->check(in_range(1, 65535))->group(kClusterGroup);
  app.add_option("--resolve-timeout", o.resolve_timeout_s, "Seconds to wait for host names to resolve")
      ->capture_default_str()->check(non_negative())->group(kClusterGroup);
  limit_text(app, before);
}

void add_worker_list_options(CLI::App& app, TrainerOptions& o) {
  const size_t before = app.get_options().size();
  app.add_option("--workers", o.workers, "Data workers to pull from: host[:port],... (the port defaults to --worker-port)")
      ->delimiter(',')->allow_extra_args(false)->group(kTrainerGroup);
  app.add_option("--worker-service", o.worker_service,
                 "A DNS name with one address per data worker (a Kubernetes headless Service): NAME[:PORT]")
      ->group(kTrainerGroup);
  limit_text(app, before);
}

void add_security_options(CLI::App& app, SecurityOptions& o) {
  // An empty token would turn authentication off: refused wherever it is given (flags,
  // settings files, tandem.Feed's keywords; TANDEM_TOKEN in finish_settings).
  const CLI::Validator not_empty(
      [](std::string& v) { return v.empty() ? transport::empty_token_error("--token") : std::string(); }, "");
  const CLI::Validator names_a_file(
      [](std::string& v) { return v.empty() ? std::string("an empty path: name the file that holds the token") : ""; },
      "");
  const size_t before = app.get_options().size();
  app.add_option("--token", o.token, "The job's token every RPC carries (prefer --token-file or env TANDEM_TOKEN)")
      ->check(not_empty)->group(kSecurityGroup);
  app.add_option("--token-file", o.token_file,
                 "File holding the job's token, or a directory holding one (default: the SageMaker channel "
                 "tandem-token, if there is one)")
      ->check(names_a_file)->group(kSecurityGroup);
  app.add_option("--job-name", o.job, "The job workers belong to; default TRAINING_JOB_NAME or SLURM_JOB_ID")
      ->group(kSecurityGroup);
  app.add_option("--tls-cert", o.tls_cert, "PEM certificate: a worker's server certificate, a trainer's client one")
      ->group(kSecurityGroup);
  app.add_option("--tls-key", o.tls_key, "PEM private key of --tls-cert")->group(kSecurityGroup);
  app.add_option("--tls-ca", o.tls_ca, "PEM CA: trainers verify workers with it; workers then require client certificates")
      ->group(kSecurityGroup);
  app.add_option("--tls-server-name", o.tls_server_name, "Name in the workers' certificates, if not their address")
      ->group(kSecurityGroup);
  limit_text(app, before);
}

void add_data_options(CLI::App& app, DataOptions& o) {
  const size_t before = app.get_options().size();
  app.add_option("--data", o.data,
                 "Dataset: synthetic (learnable) | blur-benchmark | premade (no augmentation) | imagefolder[:PATH] "
                 "(one folder per class) | mnist[:PATH] (idx files) | webdataset[:PATH] (tar shards: a folder or "
                 "train-{000000..001023}.tar) | manifest:FILE (CSV path,label or JSON lines) | python:FILE:NAME "
                 "(your dataset); no PATH = the SageMaker channel --channel")
      ->capture_default_str()->group(kDataGroup);
  app.add_option("--seed", o.seed, "Seed of every random choice")->capture_default_str()
      ->transform(whole_number(0, UINT64_MAX))->group(kDataGroup);
  app.add_option("--num-classes", o.num_classes, "Classes")->capture_default_str()->group(kDataGroup);
  app.add_option("--image-size", o.image_size, "Image side in pixels; 0 = the dataset's default")
      ->capture_default_str()->check(non_negative())->group(kDataGroup);
  app.add_option("--dataset-size", o.dataset_size, "Samples per epoch; 0 = the dataset's default")
      ->capture_default_str()->transform(whole_number(0, UINT64_MAX))->group(kDataGroup);
  app.add_option("--wire-dtype", o.wire_dtype,
                 "Batches travel as float32 | bfloat16 | float16 | uint8 (values in [0,1] x 255); default the "
                 "dataset's own (uint8 for imagefolder, mnist and python, else float32)")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16", "uint8"}))->group(kDataGroup);
  app.add_option("--pipeline", o.pipeline,
                 "Augmentation of imagefolder/mnist samples, e.g. decode,random_resized_crop(224),hflip or a JSON "
                 "list; default per dataset (docs/configuration.md)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join)->group(kDataGroup);
  app.add_option("--channel", o.channel, "SageMaker channel imagefolder/mnist read when --data has no PATH")
      ->capture_default_str()->group(kDataGroup);
  app.add_option("--split", o.split, "train | test: mnist's train-* or t10k-* files; imagefolder's default pipeline")
      ->capture_default_str()->check(CLI::IsMember({"train", "test"}))->group(kDataGroup);
  app.add_option("--on-bad-sample", o.on_bad_sample,
                 "fail | skip: on an undecodable file, stop, or use the next good sample and list the file")
      ->capture_default_str()->check(CLI::IsMember({"fail", "skip"}))->group(kDataGroup);
  app.add_option("--max-image-pixels", o.max_image_pixels,
                 "An image file whose header declares more pixels is a bad sample, refused before decoding "
                 "(a decompression bomb); default Pillow's")
      ->capture_default_str()->check(in_range(1, 1e12))->group(kDataGroup);
  app.add_option("--io-threads", o.io_threads,
                 "imagefolder/webdataset/manifest: concurrent reads fetching requested samples ahead of "
                 "preprocessing; auto = 32 per core (64 to 1024), sized for network storage; 0 = none, "
                 "each thread reads its own")
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"auto", "-1"}}))
      ->default_str("auto")->check(in_range(-1, 4096))->group(kDataGroup);
  app.add_option("--emulate-read-latency-ms", o.emulate_read_latency_ms,
                 "Simulations only: add this many milliseconds to every sample read (slow storage)")
      ->capture_default_str()->check(in_range(0.0, 10000.0))->group(kDataGroup);
  app.add_option("--data-args", o.data_args, "--data python:FILE:NAME: NAME's keyword arguments, a JSON object")
      ->capture_default_str()->group(kDataGroup);
  app.add_option("--python", o.python, "--data python:... and --script: the interpreter; default $TANDEM_PYTHON (set by the wheel's tandem: its Python), else /usr/bin/python3, else python3")
      ->group(kDataGroup);
  app.add_option("--python-procs", o.python_procs, "--data python:...: Python processes; 0 = the worker's --threads")
      ->capture_default_str()->check(in_range(0, 4096))->group(kDataGroup);
  app.add_option("--sample-timeout", o.sample_timeout_s,
                 "--data python:...: a sample taking longer kills its process and is a bad sample (seconds)")
      ->capture_default_str()->check(in_range(0.001, 86400.0))->group(kDataGroup);
  limit_text(app, before);
}

void add_worker_options(CLI::App& app, WorkerOptions& o) {
  const size_t before = app.get_options().size();
  app.add_option("--port", o.port, "Port to serve on (default --worker-port); 0 = a free port, named in the log")
      ->check(in_range(0, 65535))->group(kWorkerGroup);
  app.add_option("--bind", o.bind, "Address to listen on")->capture_default_str()->group(kWorkerGroup);
  app.add_option("--threads", o.threads, "Preprocessing threads; 0 = all cores")->capture_default_str()
      ->check(non_negative())->group(kWorkerGroup);
  app.add_option("--max-request-samples", o.max_request_samples, "Most samples one request may ask for")
      ->capture_default_str()->check(in_range(1, 1 << 24))->group(kWorkerGroup);
  app.add_option("--max-streams", o.max_streams, "Most batch streams open at once")
      ->capture_default_str()->check(in_range(1, 100000))->group(kWorkerGroup);
  app.add_option("--max-inflight-mb", o.max_inflight_mb,
                 "MiB of batches accepted but not yet sent, across streams; 0 = a quarter of available memory")
      ->capture_default_str()->check(in_range(int64_t{0}, int64_t{1} << 30))->group(kWorkerGroup);
  app.add_option("--term-grace", o.term_grace_s, "After SIGTERM, serve connected trainers at most this many seconds")
      ->capture_default_str()->check(in_range(0.0, 110.0))->group(kWorkerGroup);
  app.add_option("--emulate-slowdown", o.emulate_slowdown,
                 "Simulations only: act like cores this many times slower (bench/plan_sweep.sh)")
      ->capture_default_str()->check(in_range(1.0, 1000.0))->group(kWorkerGroup);
  app.add_option("--idle-timeout", o.idle_timeout_s, "Exit when no trainer speaks for this many seconds")
      ->capture_default_str()->check(positive())->group(kWorkerGroup);
  limit_text(app, before);
}

namespace {

// The model and how it is optimised.
void add_model_options(CLI::App& app, TrainerOptions& o) {
  app.add_option("--model", o.model,
                 "Model: small_cnn | mnist_cnn | resnet18 | resnet50 | vit_tiny | vit_b16, or a TorchScript file "
                 "(docs/models.md)")
      ->capture_default_str()->group(kTrainerGroup);
  app.add_option("--optimizer", o.optimizer, "sgd (with --momentum) | adam | adamw")->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))->group(kTrainerGroup);
  app.add_option("--weight-decay", o.weight_decay, "Weight decay")->capture_default_str()
      ->check(non_negative())->group(kTrainerGroup);
  app.add_option("--lr-schedule", o.schedule, "constant | cosine (decays to 0 at --steps)")->capture_default_str()
      ->check(CLI::IsMember({"constant", "cosine"}))->group(kTrainerGroup);
  app.add_option("--warmup-steps", o.warmup_steps, "Linear learning-rate warmup steps")->capture_default_str()
      ->check(non_negative())->group(kTrainerGroup);
  app.add_option("--clip-grad-norm", o.clip_grad_norm, "Clip the gradient norm to this; 0 = off")
      ->capture_default_str()->check(non_negative())->group(kTrainerGroup);
  app.add_option("--amp", o.amp, "Mixed precision: none | bf16")->capture_default_str()
      ->check(CLI::IsMember({"none", "bf16"}))->group(kTrainerGroup);
  app.add_flag("--channels-last", o.channels_last, "Channels-last memory format")->group(kTrainerGroup);
  app.add_option("--procs-per-host", o.procs_per_host, "Trainer processes per host; 0 = one per GPU (1 on CPU)")
      ->capture_default_str()->check(non_negative())->group(kTrainerGroup);
  app.add_flag("--allow-cpu-training", o.allow_cpu_training,
               "Let a GPU-family host train on its CPU when it has no usable GPU (otherwise an error)")
      ->group(kTrainerGroup);
  app.add_flag("--fused-optimizer,!--no-fused-optimizer", o.fused_optimizer,
               "Fused optimizer kernels where LibTorch has them (2.6+); on by default, --no-fused-optimizer turns "
               "them off")
      ->group(kTrainerGroup);
}

// Batch-level mixing and label smoothing (training/batch_mix.h).
void add_mixing_options(CLI::App& app, TrainerOptions& o) {
  app.add_option("--mixup", o.mixup,
                 "MixUp: mix each batch with itself rolled by one, lambda ~ Beta(ALPHA, ALPHA); 0 = off")
      ->capture_default_str()->check(in_range(0.0, 1000.0))->group(kTrainerGroup);
  app.add_option("--cutmix", o.cutmix, "CutMix: paste a box of the rolled batch, area from Beta(ALPHA, ALPHA); 0 = off "
                 "(with --mixup, one of the two per batch)")
      ->capture_default_str()->check(in_range(0.0, 1000.0))->group(kTrainerGroup);
  app.add_option("--label-smoothing", o.label_smoothing, "Targets (1 - EPS) x one-hot + EPS / classes; 0 = off")
      ->capture_default_str()->check(in_range(0.0, 1.0))->group(kTrainerGroup);
}

// Data parallelism: ranks, rendezvous, gradient sync.
void add_parallel_options(CLI::App& app, TrainerOptions& o) {
  app.add_option("--grad-sync", o.grad_sync,
                 "overlap (allreduce gradient buckets during backward) | after-backward")
      ->capture_default_str()->check(CLI::IsMember({"overlap", "after-backward"}))->group(kTrainerGroup);
  app.add_option("--master-port", o.master_port, "Port of the rendezvous store on the first trainer host")
      ->capture_default_str()->check(in_range(1, 65535))->group(kTrainerGroup);
  app.add_option("--dist-timeout", o.dist_timeout_s, "Seconds allowed for rendezvous and each collective")
      ->capture_default_str()->check(positive())->group(kTrainerGroup);
  app.add_flag("--single-rank-group", o.single_rank_group,
               "Form the process group and allreduce gradients even with one rank (checks NCCL on one GPU)")
      ->group(kTrainerGroup);
}

// How long to train, and when to evaluate, checkpoint and log.
void add_schedule_options(CLI::App& app, TrainerOptions& o) {
  app.add_option("--checkpoint-every", o.checkpoint_every, "Steps between checkpoints; 0 = only on SIGTERM")
      ->capture_default_str()->check(non_negative())->group(kTrainerGroup);
  app.add_option("--eval-data", o.eval_data, "Held-out set for top-1 accuracy (like --data; read with --split test)")
      ->group(kTrainerGroup);
  app.add_option("--eval-every", o.eval_every, "Steps between evaluations; 0 = at the end only")
      ->capture_default_str()->check(non_negative())->group(kTrainerGroup);
  app.add_option("--keep-checkpoints", o.keep_checkpoints, "How many checkpoints to keep")
      ->capture_default_str()->check(positive())->group(kTrainerGroup);
  app.add_option("--batch-size", o.batch_size, "Samples per step")->capture_default_str()
      ->check(positive())->group(kTrainerGroup);
  app.add_option("--steps", o.steps, "Training steps")->capture_default_str()->check(positive())->group(kTrainerGroup);
  app.add_option("--epochs", o.epochs,
                 "Passes over the dataset instead of --steps (steps = epochs x floor(dataset / global batch))")
      ->check(in_range(1, 1000000))->group(kTrainerGroup);
  app.add_option("--lr", o.lr, "Learning rate")->capture_default_str()->check(positive())->group(kTrainerGroup);
  app.add_option("--momentum", o.momentum, "SGD momentum")->capture_default_str()->group(kTrainerGroup);
  app.add_option("--log-every", o.log_every, "Steps between metric lines")->capture_default_str()
      ->check(positive())->group(kTrainerGroup);
}

// The feed and the cores, and what the run records.
void add_feed_options(CLI::App& app, TrainerOptions& o) {
  app.add_option("--local-workers", o.local_workers, "In-process preprocessing threads; -1 = the spare cores")
      ->capture_default_str()->check(in_range(-1, 4096))->group(kTrainerGroup);
  app.add_option("--train-threads", o.train_threads, "LibTorch threads; 0 = the cores preprocessing leaves")
      ->capture_default_str()->check(non_negative())->group(kTrainerGroup);
  app.add_option("--inflight", o.inflight, "Requests outstanding per data worker")->capture_default_str()
      ->check(positive())->group(kTrainerGroup);
  app.add_option("--prefetch", o.prefetch, "Batches requested ahead of the training loop (bounds memory)")
      ->capture_default_str()->check(positive())->group(kTrainerGroup);
  app.add_option("--connect-timeout", o.connect_timeout_s, "Seconds to wait for data workers to come up")
      ->capture_default_str()->check(positive())->group(kTrainerGroup);
  app.add_option("--batch-timeout", o.batch_timeout_s, "Longest wait in seconds for one batch")
      ->capture_default_str()->check(positive())->group(kTrainerGroup);
  app.add_flag("--audit-samples", o.audit_samples,
               "Check every sample is consumed exactly once per epoch; report it in the summary")
      ->group(kTrainerGroup);
  app.add_option("--summary-json", o.summary_json, "Where to write the summary; default <root>/output/data/summary.json")
      ->group(kTrainerGroup);
}

}  // namespace

void add_trainer_options(CLI::App& app, TrainerOptions& o) {
  const size_t before = app.get_options().size();
  add_model_options(app, o);
  add_mixing_options(app, o);
  add_parallel_options(app, o);
  add_schedule_options(app, o);
  add_feed_options(app, o);
  limit_text(app, before);
}

void add_host_options(CLI::App& app, Settings& s) {
  add_cluster_options(app, s.cluster);
  add_security_options(app, s.security);
  add_data_options(app, s.data);
  add_worker_options(app, s.worker);
  add_trainer_options(app, s.trainer);
  add_worker_list_options(app, s.trainer);
}

void add_simulate_options(CLI::App& app, SimulateOptions& o) {
  const size_t before = app.get_options().size();
  const char* g = "Simulation";
  app.add_option("--trainer-hosts", o.trainer_hosts, "Hosts in the trainer group")->capture_default_str()->group(g);
  app.add_option("--worker-hosts", o.worker_hosts, "Hosts in the data worker group")->capture_default_str()->group(g);
  app.add_option("--trainer-instance-type", o.trainer_instance_type, "Instance type of the trainer group")
      ->capture_default_str()->group(g);
  app.add_option("--worker-instance-type", o.worker_instance_type, "Instance type of the worker group")
      ->capture_default_str()->group(g);
  app.add_option("--cpus-per-host", o.cpus_per_host, "Pin each host to this many cores; 0 = no pinning")
      ->capture_default_str()->check(non_negative())->group(g);
  app.add_option("--run-dir", o.run_dir, "Directory for the hosts' SageMaker roots; default a new /tmp/tandem-sim-*")
      ->group(g);
  app.add_flag("--keep", o.keep,
               "Keep models and checkpoints in the run directory simulate made (by default a run that ends well "
               "keeps only its summary, metrics and report there)")
      ->group(g);
  app.add_option("--timeout", o.timeout_s, "Stop the whole cluster after this many seconds")
      ->capture_default_str()->check(positive())->group(g);
  app.add_flag("--every-host", o.every_host,
               "Every host runs the command (-- COMMAND) itself, as SageMaker's training toolkit runs an entry "
               "point that calls tandem.serve(); the settings reach it as tandem- keys of hyperparameters.json")
      ->group(g);
  limit_text(app, before);
}

void add_launch_options(CLI::App& app, LaunchOptions& o) {
  const size_t before = app.get_options().size();
  app.add_option("command,--command", o.command,
                 "Your program, after --: run as the ranks of every trainer host with torchrun's variables "
                 "(e.g. -- python3 train.py --lr 0.1); none = tandem's own trainer")
      ->group(kLaunchGroup);
  app.add_option("--script", o.script, "A Python script run as the ranks: --python (or python3) FILE --script-args...")
      ->group(kLaunchGroup);
  app.add_option("--script-args", o.script_args, "Arguments of --script (repeatable; a list in a settings file)")
      ->allow_extra_args(false)->group(kLaunchGroup);
  app.add_option("--stop-grace", o.stop_grace_s,
                 "Seconds the ranks get between SIGTERM and SIGKILL; default 110 on SageMaker, else 30")
      ->check(non_negative())->group(kLaunchGroup);
  app.add_option("--release-port", o.release_port,
                 "Port of the first trainer host where the others report that their ranks ended; 0 = --master-port + 1")
      ->check(in_range(0, 65535))->group(kLaunchGroup);
  app.add_option("--release-wait", o.release_wait_s,
                 "Seconds the first trainer host waits, after its own ranks ended, for the other hosts' ranks before "
                 "it releases the workers")
      ->capture_default_str()->check(non_negative())->group(kLaunchGroup);
  limit_text(app, before);
}

namespace {

std::string normalize(std::string key) {
  for (char& c : key) if (c == '_') c = '-';
  return key;
}

// Every setting name any tandem command accepts from a file.
const std::set<std::string>& known_settings() {
  static const std::set<std::string> names = [] {
    CLI::App app;
    Settings s;
    add_cluster_options(app, s.cluster);
    add_data_options(app, s.data);
    add_worker_options(app, s.worker);
    add_trainer_options(app, s.trainer);
    add_security_options(app, s.security);
    add_launch_options(app, s.launch);
    std::set<std::string> out;
    for (const CLI::Option* o : app.get_options()) {
      if (!o->get_lnames().empty()) out.insert(o->get_lnames().front());
    }
    return out;
  }();
  return names;
}

nlohmann::json read_json_object(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read " + path + ": check the path and its permissions");
  std::stringstream text;
  text << in.rdbuf();
  if (json_depth(text.str()) > kMaxJsonDepth) {
    throw ConfigError(path + " nests arrays or objects more than " + std::to_string(kMaxJsonDepth) +
                      " deep: settings are a flat object, like {\"batch-size\": 64}");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + " is not valid JSON (" + printable(e.what(), 300) + "): fix the file's syntax");
  }
  if (!j.is_object()) throw ConfigError(path + " must hold a JSON object of settings, like {\"batch-size\": 64}");
  return j;
}

// A hyperparameter written as a list or an object, bracket to bracket.
bool bracketed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r\n"), last = s.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) return false;
  const std::string_view t = std::string_view(s).substr(first, last - first + 1);
  return t.size() >= 2 && ((t.front() == '[' && t.back() == ']') || (t.front() == '{' && t.back() == '}') ||
                           (t.front() == '(' && t.back() == ')'));
}

// SageMaker passes every hyperparameter as a string: JSON-encoded by the framework
// estimators ("\"abc\"", "64", "[\"--epochs\", \"90\"]"), or str() of the value by the
// generic Estimator ("['--epochs', '90']", "{'root': '/opt/ml'}"). Both forms are read.
std::vector<std::string> values_of(const nlohmann::json& v, bool from_sagemaker, const std::string& key,
                                   const std::string& path) {
  if (v.is_array()) {
    std::vector<std::string> out;
    for (const auto& e : v) out.push_back(e.is_string() ? e.get<std::string>() : e.dump());
    return out;
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (from_sagemaker) {
      nlohmann::json decoded =
          json_depth(s) > kMaxJsonDepth ? nlohmann::json(nlohmann::json::value_t::discarded)
                                          : nlohmann::json::parse(s, nullptr, false);
      if (decoded.is_discarded() && bracketed(s)) {
        std::optional<nlohmann::json> literal = parse_python_literal(s);
        if (!literal) {
          throw ConfigError("'" + printable(key, 80) + "' in " + path + " looks like a list or an object but is " +
                            "neither JSON nor a Python literal: " + printable(s, 120) + ": write it as JSON " +
                            "([\"--epochs\", \"90\"] or {\"root\": \"/data\"}), or as the SDK's str() of a " +
                            "list or dict (['--epochs', '90'] or {'root': '/data'})");
        }
        decoded = std::move(*literal);
      }
      if (decoded.is_object()) return {decoded.dump()};
      if (!decoded.is_discarded() && (decoded.is_string() || decoded.is_array())) {
        return values_of(decoded, false, key, path);
      }
    }
    return {s};
  }
  return {v.dump()};
}

// "unknown setting 'batch_sise' in FILE: did you mean 'batch_size'?", spelled as the file spells keys.
std::string unknown_setting(const std::string& key, const std::string& path) {
  std::vector<std::string> names(known_settings().begin(), known_settings().end());
  const bool underscores = key.find('_') != std::string::npos;
  std::string guess = nearest(normalize(key), names, std::max<size_t>(1, key.size() / 3));
  if (underscores) std::replace(guess.begin(), guess.end(), '-', '_');
  return "unknown setting '" + printable(key, 80) + "' in " + path +
         (guess.empty() ? "" : ": did you mean '" + guess + "'?") + " (`tandem launch --help` lists the settings)";
}

// Which settings files set which setting: name -> "'key' in FILE", for messages.
using FileOrigins = std::map<std::string, std::string>;

// SageMaker's hyperparameters.json belongs to the user's script when tandem.serve() runs
// tandem from it (TANDEM_SCRIPT_HYPERPARAMETERS=1): then only tandem- (or tandem_) keys
// are tandem's, and the rest are left to the script, named once in the log.
bool script_owns_hyperparameters() {
  const char* v = std::getenv("TANDEM_SCRIPT_HYPERPARAMETERS");
  return v && *v && std::string(v) != "0";
}

// A key of hyperparameters.json with its tandem- prefix taken off ("tandem_image_size" ->
// "image-size"); nullopt for the script's own key (only under script_owns_hyperparameters).
std::optional<std::string> tandem_key(const std::string& key, bool script_owned) {
  const std::string n = normalize(key);
  if (n.rfind("tandem-", 0) == 0 && n.size() > 7) return n.substr(7);
  if (script_owned) return std::nullopt;
  return n;
}

void apply_file(CLI::App& cmd, const std::string& path, bool from_sagemaker, FileOrigins& set_by_file) {
  const nlohmann::json settings = read_json_object(path);
  const bool script_owned = from_sagemaker && script_owns_hyperparameters();
  std::vector<std::string> left;  // the script's keys
  for (const auto& [key, value] : settings.items()) {
    if (from_sagemaker && key.rfind("sagemaker_", 0) == 0) continue;  // the toolkit's own keys
    const std::optional<std::string> stripped = from_sagemaker ? tandem_key(key, script_owned) : normalize(key);
    if (!stripped) {
      left.push_back(printable(key, 80));
      continue;
    }
    const std::string name = *stripped;
    if (name == "config" || name == "sagemaker-root") {
      throw ConfigError("'" + printable(key, 80) + "' in " + path + " cannot be set from a file: pass --" + name + " as a flag");
    }
    if (!known_settings().count(name)) throw ConfigError(unknown_setting(key, path));
    CLI::Option* opt = cmd.get_option_no_throw("--" + name);
    if (!opt) continue;  // a setting for another role
    if (opt->count() > 0 && !set_by_file.count(name)) continue;  // a flag wins
    const std::vector<std::string> values = values_of(value, from_sagemaker, key, path);
    const bool listed = value.is_array() || (values.size() != 1);
    if (listed && opt->get_expected_max() <= 1) {
      throw ConfigError("'" + printable(key, 80) + "' in " + path + " takes one value, not a list of " +
                        std::to_string(values.size()) + ": write it as a single value");
    }
    opt->clear();
    for (const std::string& v : values) opt->add_result(v);
    try {
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw ConfigError("bad value for '" + printable(key, 80) + "' in " + path + ": " + one_line(e.what()));
    }
    set_by_file[name] = "'" + printable(key, 80) + "' in " + path;
  }
  if (!left.empty()) {
    spdlog::info("{}: {} left to your script (under tandem.serve() tandem reads only its tandem- keys there)", path,
                 fmt::format("{}", fmt::join(left, ", ")));
  }
}

// "--steps" or "'steps' in FILE": where a setting's value came from.
std::string origin_of(const CLI::Option& opt, const FileOrigins& set_by_file) {
  const auto it = set_by_file.find(opt.get_lnames().front());
  return it != set_by_file.end() ? it->second : "--" + opt.get_lnames().front();
}

}  // namespace

void apply_setting_files(CLI::App& cmd, const ClusterOptions& opts) {
  FileOrigins set_by_file;
  if (!opts.config_file.empty()) apply_file(cmd, opts.config_file, false, set_by_file);
  const std::string hp = opts.sagemaker_root + "/input/config/hyperparameters.json";
  if (std::filesystem::exists(hp)) apply_file(cmd, hp, true, set_by_file);
  const CLI::Option* steps = cmd.get_option_no_throw("--steps");
  const CLI::Option* epochs = cmd.get_option_no_throw("--epochs");
  if (steps && epochs && steps->count() > 0 && epochs->count() > 0) {
    throw ConfigError("both steps and epochs are set (" + origin_of(*steps, set_by_file) + ", " +
                      origin_of(*epochs, set_by_file) + "): give one of them");
  }
}

void finish_settings(Settings& s, bool is_rank, const cluster::EnvLookup& env) {
  s.data.sagemaker_root = s.cluster.sagemaker_root;  // channels live under it
  if (is_rank) s.launcher = cluster::read_launcher_env(env);
  const auto set = [&](const char* name) -> std::string {
    const auto v = env(name);
    return v ? *v : "";
  };
  if (s.security.token.empty() && s.security.token_file.empty()) {
    if (const auto env_token = env("TANDEM_TOKEN")) {
      if (env_token->empty()) throw ConfigError(transport::empty_token_error("TANDEM_TOKEN"));
      s.security.token = *env_token;
    } else {
      s.security.token_file = transport::token_channel(s.cluster.sagemaker_root);
    }
  }
  const std::string quiet = set("TANDEM_QUIET");
  if (!quiet.empty() && quiet != "0") s.quiet = true;
  for (const char* var : {"TRAINING_JOB_NAME", "SLURM_JOB_ID"}) {
    if (s.security.job.empty()) s.security.job = set(var);
  }
  transport::resolve_security(s.security);
}

nlohmann::json given_settings(const CLI::App& cmd) {
  nlohmann::json out = nlohmann::json::object();
  for (const CLI::Option* o : cmd.get_options()) {
    const std::string& g = o->get_group();
    if (g != kDataGroup && g != kWorkerGroup && g != kTrainerGroup && g != kSecurityGroup) continue;
    if (o->count() == 0 || o->get_lnames().empty()) continue;
    // The token travels in the environment (TANDEM_TOKEN), never on command lines or in
    // files tandem writes.
    if (o->get_lnames().front() == "token") continue;
    const auto& results = o->results();
    if (results.empty()) continue;
    if (o->get_expected_max() > 1) out[o->get_lnames().front()] = results;
    else out[o->get_lnames().front()] = results.back();
  }
  return out;
}

}  // namespace tandem::cli
