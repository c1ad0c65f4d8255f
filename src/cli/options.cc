#include "tandem/cli/options.h"
#include "flag_checks.h"
#include "python_options.h"

#include "tandem/transport/credentials.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
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
  app.add_option("--metrics-port", o.metrics_port,
                 "A worker, and a trainer's rank 0, serve Prometheus text at http://HOST:PORT/metrics; -1 = off, "
                 "0 = a free port")
      ->capture_default_str()->check(in_range(-1, 65535))->group(kClusterGroup);
  app.add_option("--metrics-bind", o.metrics_bind,
                 "Address --metrics-port listens on (IPv4); default: a worker's --bind, a trainer's 0.0.0.0")
      ->group(kClusterGroup);
  limit_text(app, before);
}

void add_worker_list_options(CLI::App& app, TrainerOptions& o) {
  const size_t before = app.get_options().size();
  app.add_option("--workers", o.workers, "Data workers to pull from: host[:port],... (the port defaults to --worker-port)")
      ->delimiter(',')->allow_extra_args(false)->group(kTrainerGroup);
  app.add_option("--worker-service", o.worker_service,
                 "A DNS name with one address per data worker (a Kubernetes headless Service): NAME[:PORT], "
                 "re-resolved as the run goes")
      ->group(kTrainerGroup);
  app.add_option("--workers-watch", o.workers_watch,
                 "A file of data workers, host:port a line, re-read when it changes: workers join and leave the run")
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

namespace {

// Flags that only simulations use.
void add_emulation_options(CLI::App& app, DataOptions& o) {
  app.add_option("--emulate-read-latency-ms", o.emulate_read_latency_ms,
                 "Simulations only: add this many milliseconds to every sample read (slow storage)")
      ->capture_default_str()->check(in_range(0.0, 10000.0))->group(kDataGroup);
}

}  // namespace

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
  app.add_flag("--require-deterministic", o.require_deterministic,
               "Users' code (python:FILE:NAME) whose samples differ when made twice with the same seed is an error, "
               "not a warning (docs/datasets.md)")
      ->group(kDataGroup);
  app.add_option("--max-image-pixels", o.max_image_pixels,
                 "An image file whose header declares more pixels is a bad sample, refused before decoding "
                 "(a decompression bomb); default Pillow's")
      ->capture_default_str()->check(in_range(1, 1e12))->group(kDataGroup);
  app.add_option("--io-threads", o.io_threads,
                 "imagefolder/webdataset/manifest: concurrent reads fetching requested samples ahead of "
                 "preprocessing, at most; auto = 4096 on io_uring, else 32 I/O threads per core (64 to 1024), "
                 "within the read-ahead's bytes; 0 = none, each thread reads its own")
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"auto", "-1"}}))
      ->default_str("auto")->check(in_range(-1, 65536))->group(kDataGroup);
  app.add_option("--io-engine", o.io_engine,
                 "How reads ahead fly: auto = io_uring where the kernel allows it, else I/O threads; uring; threads")
      ->capture_default_str()->check(CLI::IsMember({"auto", "uring", "threads"}))->group(kDataGroup);
  add_emulation_options(app, o);
  add_python_options(app, o);
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
  app.add_option("--max-connections", o.max_connections,
                 "Most TCP connections open at once (more are closed at once); 0 = a quarter of the open-files limit")
      ->capture_default_str()->check(in_range(0, 1000000))->group(kWorkerGroup);
  app.add_option("--max-inflight-mb", o.max_inflight_mb,
                 "MiB of batches accepted but not yet sent, across streams; 0 = a quarter of available memory")
      ->capture_default_str()->check(in_range(int64_t{0}, int64_t{1} << 30))->group(kWorkerGroup);
  app.add_option("--term-grace", o.term_grace_s, "After SIGTERM, serve connected trainers at most this many seconds")
      ->capture_default_str()->check(in_range(0.0, 110.0))->group(kWorkerGroup);
  app.add_flag("--drain", o.drain,
               "On SIGTERM leave the job politely: tell the trainers, answer what was accepted (within --term-grace), "
               "exit 0")
      ->group(kWorkerGroup);
  app.add_option("--pool-jobs", o.pool_jobs,
                 "Serve several jobs at once and after one another, each by its own token from this JSON file "
                 "(re-read when it changes; docs/security.md): a pool that never exits idle")
      ->group(kWorkerGroup);
  app.add_option("--share-window-mb", o.share_window_mb,
                 "A pool's made batches kept (MiB) for other jobs' identical requests; 0 = none shared")
      ->capture_default_str()->check(in_range(int64_t{0}, int64_t{1} << 20))->group(kWorkerGroup);
  app.add_option("--emulate-slowdown", o.emulate_slowdown,
                 "Simulations only: act like cores this many times slower (bench/plan_sweep.sh)")
      ->capture_default_str()->check(in_range(1.0, 1000.0))->group(kWorkerGroup);
  app.add_option("--idle-timeout", o.idle_timeout_s, "Exit when no trainer speaks for this many seconds")
      ->capture_default_str()->check(positive())->group(kWorkerGroup);
  app.add_option("--claim-timeout", o.claim_timeout_s,
                 "Exit (5) when no trainer of the job has called at all this many seconds after the start (0: never)")
      ->capture_default_str()->check(non_negative())->group(kWorkerGroup);
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
  app.add_option("--checkpoint-every", o.checkpoint_every,
                 "Steps between checkpoints; 0 = only on SIGTERM; auto = the interval that loses least to spot "
                 "interruptions, from the measured checkpoint cost (docs/plan.md)")
      ->capture_default_str()
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"auto", "-1"}}))
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()))
      ->group(kTrainerGroup);
  app.add_option("--eval-data", o.eval_data, "Held-out set for top-1 accuracy (like --data; read with --split test)")
      ->group(kTrainerGroup);
  app.add_option("--eval-every", o.eval_every, "Steps between evaluations; 0 = at the end only")
      ->capture_default_str()->check(non_negative())->group(kTrainerGroup);
  app.add_option("--keep-checkpoints", o.keep_checkpoints, "How many checkpoints to keep")
      ->capture_default_str()->check(positive())->group(kTrainerGroup);
  app.add_flag("--resume-any", o.resume_any,
               "Resume from the newest checkpoint even when another job wrote it (another model, optimizer or dataset)")
      ->group(kTrainerGroup);
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
  app.add_option("--emulate-step-ms", o.emulate_step_ms,
                 "Simulations only: each training step takes at least this many ms, the rest asleep, as on an "
                 "accelerator that slow (bench/plan_sweep.sh); 0 = off")
      ->capture_default_str()->check(in_range(0.0, 600000.0))->group(kTrainerGroup);
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
               "point that calls tandem.serve(): the toolkit's SM_* environment, the settings as tandem- keys of "
               "hyperparameters.json and --key value arguments, through /bin/sh")
      ->group(g);
  app.add_option("--job", o.job_file,
                 "A SageMaker job's estimator arguments (JSON: instance groups, hyperparameters, distribution, channels "
                 "per group, checkpoints; docs/sagemaker.md): every host runs its entry point as the toolkit does "
                 "(implies --every-host)")
      ->check(CLI::ExistingFile)->group(g);
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
  app.add_option("--share-streams", o.share_streams,
                 "A host's ranks share one stream to each data worker through a local relay: on, off, or auto (on "
                 "past 64 ranks in the job)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "on", "off"}))->group(kLaunchGroup);
  limit_text(app, before);
}

}  // namespace tandem::cli
