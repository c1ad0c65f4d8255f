// Plain settings structs with documented defaults. They are filled once, from defaults,
// then a --config JSON file, then SageMaker's hyperparameters.json, then flags (each
// later source wins), and passed around by const&. See docs/configuration.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// Where this host sits in the job and how to reach the others.
struct ClusterOptions {
  std::string sagemaker_root = "/opt/ml";    // --sagemaker-root, env TANDEM_SAGEMAKER_ROOT
  std::string config_file;                   // --config FILE.json
  std::vector<std::string> trainer_groups;   // --trainer-group NAME (repeatable)
  std::vector<std::string> worker_groups;    // --worker-group NAME (repeatable)
  std::string current_host;                  // --current-host: overrides discovery
  // --host-map name=addr[:port],... (env TANDEM_HOST_MAP): how to reach a host by name.
  // `simulate` uses it to put every host on 127.0.0.1 with its own ports.
  std::vector<std::string> host_map;
  int worker_port = 6000;                    // --worker-port: where data workers listen
  // Whether --worker-port and --master-port were given (a flag, a settings file): on
  // Slurm the ports not given come from the job's id (cluster::slurm_job_ports).
  bool worker_port_given = false;
  bool master_port_given = false;
  // --metrics-port: a data worker, and a trainer's rank 0, serve Prometheus text at
  // /metrics (-1 = none; 0 = a free port, logged): rates, data wait, tandem_workers_wanted.
  int metrics_port = -1;
  double resolve_timeout_s = 120;            // --resolve-timeout: DNS may lag at job start
};

// Who may speak to a data worker (docs/security.md). Trainers and workers of one job
// must agree.
struct SecurityOptions {
  // --token (prefer --token-file or env TANDEM_TOKEN: flags show in `ps`): every RPC
  // carries it as `authorization: Bearer TOKEN`; workers refuse calls without it.
  // Empty = the data plane is open (tandem says so loudly outside loopback).
  std::string token;
  std::string token_file;  // --token-file: read the token from this file
  // --job-name: the job a worker belongs to; it refuses trainers of another job. Default:
  // SageMaker's TRAINING_JOB_NAME, else Slurm's SLURM_JOB_ID, else none.
  std::string job;
  // TLS (all PEM files): a worker serves with --tls-cert/--tls-key and, given --tls-ca,
  // requires clients to present a certificate signed by it; a trainer verifies workers
  // against --tls-ca and presents --tls-cert/--tls-key when given.
  std::string tls_cert, tls_key, tls_ca;
  std::string tls_server_name;  // --tls-server-name: the name workers' certificates carry, if not their address
};

// Pillow's MAX_IMAGE_PIXELS: images up to about 9459 x 9459 pass.
inline constexpr uint64_t kDefaultMaxImagePixels = 89478485;

// What every sample is and how it is augmented. Trainer and workers must agree.
struct DataOptions {
  // --data: synthetic | blur-benchmark | premade | imagefolder[:PATH] | mnist[:PATH] |
  // webdataset[:PATH] | manifest:FILE | python:FILE:NAME (without PATH: the SageMaker
  // channel <sagemaker_root>/input/data/<channel>)
  std::string data = "synthetic";
  uint64_t seed = 0;               // --seed: with (epoch, index) it fixes every random choice
  int num_classes = 10;            // --num-classes
  int image_size = 0;              // --image-size: 0 = the dataset's default
  uint64_t dataset_size = 0;       // --dataset-size: samples per epoch; 0 = default
  // --wire-dtype: float32 | bfloat16 | float16 | uint8 (values in [0,1] x 255); empty =
  // the dataset's own (uint8 for imagefolder and mnist, else float32). The trainer
  // converts back to float on its device.
  std::string wire_dtype;
  // --pipeline: augmentation of imagefolder / mnist samples, e.g.
  // "decode,random_resized_crop(224),hflip,color_jitter(0.4,0.4,0.4),to_uint8" or a JSON
  // list; empty = the dataset's default. See docs/configuration.md.
  std::string pipeline;
  std::string channel = "train";        // --channel: SageMaker channel read when --data has no PATH
  std::string split = "train";          // --split: train | test (mnist's files; imagefolder's default pipeline)
  std::string on_bad_sample = "fail";   // --on-bad-sample: fail | skip (use the next good sample, list the bad one)
  // --require-deterministic: users' code whose samples differ when made twice (a worker's
  // check at start, two copies of one batch) is an error, not a warning.
  bool require_deterministic = false;
  // --max-image-pixels: an image file whose header declares more pixels is a bad sample
  // (a decompression bomb), refused before anything of it is decoded.
  uint64_t max_image_pixels = kDefaultMaxImagePixels;
  // --data python:FILE:NAME (docs/datasets.md): NAME's keyword arguments (--data-args, a
  // JSON object), the interpreter (--python; empty = /usr/bin/python3, else python3 on
  // PATH), its processes (--python-procs; 0 = the worker's --threads) and the most one
  // sample may take before its process is killed (--sample-timeout).
  std::string data_args = "{}";
  std::string python;
  int python_procs = 0;
  double sample_timeout_s = 60;
  // Not flags: set by the roles. A worker's Python processes map at most python_shm_bytes
  // of shared memory together (half of --max-inflight-mb; 0 = 4 GiB each); a trainer starts
  // python_start_procs of them at once (0 = all) and the others as its threads need them.
  uint64_t python_shm_bytes = 0;
  int python_start_procs = 0;
  // Reading from slow storage (imagefolder, webdataset, manifest): threads that fetch the
  // bytes of requested samples ahead of preprocessing, many reads at once (--io-threads;
  // -1 = auto, io_threads_for(); 0 = none, each preprocessing thread reads its own), and,
  // for simulations only, a delay added to every sample read (--emulate-read-latency-ms).
  // Neither changes a sample.
  int io_threads = -1;
  double emulate_read_latency_ms = 0;
  // How the reads fly (--io-engine): "auto" (io_uring where the kernel allows it, else
  // threads), "uring" or "threads".
  std::string io_engine = "auto";
  // Not a flag: set by the roles. Fetched bytes the read-ahead may hold (a worker: a
  // quarter of --max-inflight-mb; 0 = 256 MiB).
  uint64_t read_ahead_bytes = 0;
  // Not a flag: the command line copies ClusterOptions::sagemaker_root here.
  std::string sagemaker_root = "/opt/ml";
};

// A data worker's server.
struct WorkerOptions {
  int port = -1;              // --port: -1 (unset) = ClusterOptions::worker_port; 0 = a free port, logged
  std::string bind = "0.0.0.0";
  int threads = 0;            // --threads: preprocessing threads; 0 = all cores
  double idle_timeout_s = 600;  // --idle-timeout: exit when no trainer speaks for this long
  // Limits that keep a worker alive whatever its clients send (RESOURCE_EXHAUSTED names
  // the limit): samples in one request, open streams, and bytes of batches accepted but
  // not yet sent, across every stream (0 = a quarter of the memory available at start).
  int max_request_samples = 65536;  // --max-request-samples
  int max_streams = 64;             // --max-streams
  int64_t max_inflight_mb = 0;      // --max-inflight-mb
  // --term-grace: after SIGTERM, keep serving connected trainers this long at most (they
  // are stopping too, and need their batches to reach a checkpoint).
  double term_grace_s = 30;
  // --drain: SIGTERM makes this worker leave its job politely (a spot notice, a scale-in):
  // it tells its trainers, which send it nothing more, answers what it accepted (within
  // --term-grace) and exits 0. Without it, SIGTERM means the whole job is stopping.
  bool drain = false;
  // --emulate-slowdown K: for simulations only, behave like a core K times slower (each
  // batch chunk is followed by a sleep of K-1 times its CPU time, reported as compute).
  double emulate_slowdown = 1;
};

// The training loop and its feeding.
struct TrainerOptions {
  // Data workers named directly rather than by an instance group (torchrun, Kubeflow,
  // `tandem trainer`): --workers host[:port],... and --worker-service NAME[:PORT] (or
  // --workers dns:NAME[:PORT]), a DNS name with one address per worker (a Kubernetes
  // headless Service), re-resolved while the run goes; --workers-watch FILE, a file of
  // host:port lines re-read when it changes (worker_directory.h).
  std::vector<std::string> workers;
  std::string worker_service;
  std::string workers_watch;
  std::string model = "small_cnn";   // --model: small_cnn | mnist_cnn | resnet18 | resnet50 | vit_tiny | vit_b16 | FILE.pt
  int batch_size = 64;               // --batch-size: per trainer process
  int64_t steps = 300;               // --steps
  int64_t epochs = 0;                // --epochs: instead of --steps, passes over the dataset; 0 = use --steps
  std::string optimizer = "sgd";     // --optimizer: sgd (momentum) | adam | adamw
  double lr = 0.05;                  // --lr: peak learning rate
  double momentum = 0.9;             // --momentum (sgd)
  double weight_decay = 0;           // --weight-decay
  int64_t warmup_steps = 0;          // --warmup-steps: linear warmup, then cosine decay to 0
  std::string schedule = "constant"; // --lr-schedule: constant | cosine
  double clip_grad_norm = 0;         // --clip-grad-norm: 0 = off
  std::string amp = "none";          // --amp: none | bf16 (autocast on CUDA and CPU)
  // Batch-level mixing and label smoothing (torchvision's classification reference), on
  // the trainer's device, for classification (image + label) models: 0 = off.
  double mixup = 0;                  // --mixup ALPHA: lambda ~ Beta(ALPHA, ALPHA)
  double cutmix = 0;                 // --cutmix ALPHA (with --mixup, one of the two per batch)
  double label_smoothing = 0;        // --label-smoothing EPS: targets (1-EPS) onehot + EPS/classes
  bool channels_last = false;        // --channels-last
  int procs_per_host = 0;            // --procs-per-host: trainer processes per host; 0 = GPUs (1 on CPU)
  // --allow-cpu-training: let a host of a GPU instance family (ml.p*, ml.g*) train on its
  // CPU when this tandem has no CUDA or sees no GPU; without it that is an error.
  bool allow_cpu_training = false;
  // --grad-sync: overlap (allreduce each gradient bucket as soon as backward fills it) |
  // after-backward (the same buckets, all sent once backward has finished).
  std::string grad_sync = "overlap";
  // --fused-optimizer / --no-fused-optimizer: one fused kernel per optimizer step where
  // LibTorch has them (2.6 and later), the per-parameter C++ optimizers otherwise.
  bool fused_optimizer = true;
  int master_port = 29500;           // --master-port: c10d TCPStore on the first trainer host
  double dist_timeout_s = 300;       // --dist-timeout: rendezvous and collective deadline
  // --single-rank-group: form the process group and allreduce gradients with one rank
  // too (NCCL on a one-GPU machine; a world of 1 otherwise skips both)
  bool single_rank_group = false;
  int64_t checkpoint_every = 0;      // --checkpoint-every: steps between checkpoints; 0 = only on SIGTERM; -1 = auto
  int keep_checkpoints = 3;          // --keep-checkpoints: the newest K are kept
  bool resume_any = false;           // --resume-any: resume a checkpoint of another model, optimizer or dataset
  // --eval-data: a held-out set (same forms as --data, read with --split test); the
  // trainer reports its top-1 accuracy every --eval-every steps (0 = at the end only).
  std::string eval_data;
  int64_t eval_every = 0;
  int log_every = 20;                // --log-every
  // --emulate-step-ms: simulations only; each training step (or a script's, between two
  // batches of tandem.Feed) takes at least this long, sleeping the rest (pad_step).
  double emulate_step_ms = 0;
  int local_workers = -1;            // --local-workers: in-process preprocessing threads; -1 = spare cores
  int train_threads = 0;             // --train-threads: LibTorch intra-op threads; 0 = auto
  int inflight = 4;                  // --inflight: requests outstanding per worker
  int prefetch = 16;                 // --prefetch: batches requested ahead of the loop
  double connect_timeout_s = 180;    // --connect-timeout: waiting for workers to come up
  double batch_timeout_s = 120;      // --batch-timeout: longest wait for one batch
  std::string summary_json;          // --summary-json: default <root>/output/data/summary.json
  // --audit-samples: record which samples each batch was made from and report, per
  // epoch, missing, duplicated and unplanned samples in the summary (sample_audit).
  bool audit_samples = false;
};

// A whole heterogeneous cluster as local processes.
struct SimulateOptions {
  int trainer_hosts = 1;                           // --trainer-hosts
  int worker_hosts = 2;                            // --worker-hosts
  std::string trainer_instance_type = "ml.p4d.24xlarge";
  std::string worker_instance_type = "ml.c5.18xlarge";
  int cpus_per_host = 0;                           // --cpus-per-host: pin each host; 0 = no pinning
  std::string run_dir;                             // --run-dir: default a fresh /tmp/tandem-sim-*
  bool keep = false;                               // --keep: keep models and checkpoints of a fresh run dir
  double timeout_s = 1800;                         // --timeout: stop the cluster after this long
  // --every-host: every host runs the command itself (as SageMaker's training toolkit runs
  // the entry point on every host: one script that calls tandem.serve()), not `tandem
  // launch`; the settings reach it as tandem- keys of hyperparameters.json.
  bool every_host = false;
  // --job FILE: a SageMaker job's estimator arguments (launch/sagemaker_job.h): its groups,
  // hyperparameters, distribution, channels and checkpoints, run as the toolkit runs them.
  std::string job_file;
};

// A user's program run as the ranks of each trainer host (`tandem launch -- COMMAND`,
// docs/python.md). Neither command nor script set: the ranks are tandem's own trainer.
struct LaunchOptions {
  // `-- COMMAND ARGS...` after the flags, or `command` in a settings file (a list).
  std::vector<std::string> command;
  // --script FILE (SageMaker's hyperparameters): the command is the Python interpreter
  // (--python, else /usr/bin/python3, else python3 on PATH), FILE and --script-args.
  std::string script;
  std::vector<std::string> script_args;  // --script-args ARG (repeatable; a list in a file)
  // --role-only (tandem.serve()): print this host's role as one JSON line and exit 0.
  bool role_only = false;
  // --stop-grace: seconds the ranks get between SIGTERM and SIGKILL when the job stops;
  // -1 = 110 on SageMaker (which kills the container 120 s after its SIGTERM), else 30.
  double stop_grace_s = -1;
  // --release-port: where the first trainer host hears that another's ranks have ended
  // (launch/release_gate.h); 0 = --master-port + 1.
  int release_port = 0;
  // --release-wait: how long the first trainer host waits, once its own ranks have ended,
  // for the other trainer hosts' ranks before it releases the workers anyway.
  double release_wait_s = 300;
  // --share-streams: a trainer host's ranks share one batch stream to each data worker
  // through a relay (transport/stream_relay.h): "on", "off", or "auto" (on when the job
  // has more ranks than kShareStreamsAbove, where a worker would serve one stream per
  // rank; off below, where a direct stream costs the host no copy).
  std::string share_streams = "auto";
};
inline constexpr int kShareStreamsAbove = 64;

// What the launcher that started this process said through its environment, read once
// at start (cluster::read_launcher_env) so no other code reads the environment.
struct LauncherEnv {
  // torchrun's contract for one rank, set by torchrun, Kubeflow's PyTorchJob, or `tandem
  // launch` for the ranks it starts. None set: a world of one.
  int world_size = 1;        // WORLD_SIZE
  int rank = 0;              // RANK
  int local_rank = 0;        // LOCAL_RANK
  int local_world_size = 1;  // LOCAL_WORLD_SIZE
  std::string master_addr;   // MASTER_ADDR; empty = 127.0.0.1
  int master_port = 0;       // MASTER_PORT; 0 = --master-port
  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent serves the rendezvous store, under
  // the prefix of attempt TORCHELASTIC_RESTART_COUNT.
  bool agent_store = false;
  int restart_count = 0;
  // Set by `tandem launch` for its ranks: the address Gloo binds to (TANDEM_GLOO_ADDRESS),
  // and by `tandem simulate` for its hosts (TANDEM_SIMULATED_HOST: instance types are
  // labels there, every host shares one machine).
  std::string gloo_address;
  bool simulated_host = false;
  // Set by `tandem launch` for its ranks when they share their streams to each data
  // worker (--share-streams): the host's stream relay, "unix:PATH"
  // (TANDEM_STREAM_RELAY; transport/stream_relay.h).
  std::string stream_relay;
};

struct Settings {
  ClusterOptions cluster;
  SecurityOptions security;
  DataOptions data;
  WorkerOptions worker;
  TrainerOptions trainer;
  SimulateOptions simulate;
  LaunchOptions launch;
  LauncherEnv launcher;
  // --quiet, or TANDEM_QUIET=1 from the tandem that started this process: warnings and
  // errors only, and no status line.
  bool quiet = false;
};

}  // namespace tandem
