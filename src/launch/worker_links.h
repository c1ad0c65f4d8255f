// Internal to the trainer role: what it asks its data workers outside the feed (the
// dataset, before it has one; what they skipped and are, for the summary; the release
// at the end). The feed itself is transport::FeedSources.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tandem/cluster/cluster.h"
#include "tandem/common/settings.h"
#include "tandem/data/sources/dataset.h"
#include "tandem/report/plan_inputs.h"
#include "tandem/transport/remote_worker.h"

namespace tandem::launch {

// The deadline of the calls that end a run: a healthy worker answers in milliseconds.
inline constexpr double kReleaseDeadlineS = 3;

// For a trainer without a copy of the data: waits (up to --connect-timeout, or until
// `stop`) for the first worker that answers and learns the dataset from it. The other
// workers are checked against it when they connect.
data::DatasetInfo learn_dataset_from_workers(const std::vector<std::string>& targets, const Settings& settings,
                                             const std::atomic<bool>& stop);

// Samples substituted under --on-bad-sample skip, here (`local`, may be null) and on
// every worker, into summary["skipped_samples"/"skipped_files"]; and what each worker is.
// All asked at once, so a hung worker costs one short deadline.
std::vector<report::WorkerFacts> ask_workers(nlohmann::json& summary, const data::Dataset* local,
                                             const std::vector<std::unique_ptr<transport::RemoteWorker>>& workers,
                                             const cluster::Cluster& cluster);

// Tells every worker that training is over, all at once with short deadlines.
void release_workers(const std::vector<std::string>& targets, const SecurityOptions& security,
                     const std::string& reason);

}  // namespace tandem::launch
