// One error model: every error tandem raises on purpose is a tandem::Error; each kind
// maps once to an exit code and once to the gRPC status a data worker answers with.
#include <new>
#include <stdexcept>

#include <gtest/gtest.h>

#include "tandem/common/error.h"
#include "tandem/data/codecs/jpeg.h"
#include "transport/status.h"

namespace tandem {
namespace {

TEST(Errors, EveryKindIsATandemError) {
  const ConfigError config("c");
  const NetworkError network("n");
  const PeerError peer("p");
  const DataError data("d");
  const data::DecodeError decode("x");
  const Interrupted interrupted("i");
  const Diverged diverged("v");
  for (const std::exception* e : std::initializer_list<const std::exception*>{
           &config, &network, &peer, &data, &decode, &interrupted, &diverged}) {
    EXPECT_NE(dynamic_cast<const Error*>(e), nullptr) << e->what();
  }
  EXPECT_NE(dynamic_cast<const DataError*>(static_cast<const std::exception*>(&decode)), nullptr);
}

TEST(Errors, ExitCodes) {
  // A requeue rule acts on these (docs/configuration.md, "Exit codes"): pinned here.
  EXPECT_EQ(exit_code(Interrupted("SIGTERM")), 75);
  EXPECT_EQ(exit_code(ConfigError("bad flag")), 3);
  EXPECT_EQ(exit_code(DataError("truncated")), 4);
  EXPECT_EQ(exit_code(NetworkError("gone")), 5);
  EXPECT_EQ(exit_code(PeerError("bad batch")), 5);
  EXPECT_EQ(exit_code(Overloaded("too many streams")), 5);
  EXPECT_EQ(exit_code(Diverged("nan")), 1);
  EXPECT_EQ(exit_code(std::runtime_error("anything else")), 1);
}

TEST(Errors, GrpcStatusesNameWhatWasBeingDone) {
  using grpc::StatusCode;
  const grpc::Status bad = transport::status_for(data::DecodeError("not a JPEG"), "making batch 12");
  EXPECT_EQ(bad.error_code(), StatusCode::DATA_LOSS) << "a bad file is not worth a retry, on any worker";
  EXPECT_EQ(bad.error_message(), "data worker, making batch 12: not a JPEG");
  EXPECT_EQ(transport::status_for(ConfigError("x"), "a").error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(transport::status_for(PeerError("x"), "a").error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(transport::status_for(std::out_of_range("index 9"), "a").error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(transport::status_for(std::bad_alloc(), "a").error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(transport::status_for(NetworkError("x"), "a").error_code(), StatusCode::UNAVAILABLE);
  EXPECT_EQ(transport::status_for(Interrupted("x"), "a").error_code(), StatusCode::CANCELLED);
  EXPECT_EQ(transport::status_for(std::logic_error("bug"), "a").error_code(), StatusCode::INTERNAL);
}

TEST(Errors, ContextClimbs) {
  try {
    try {
      throw PeerError("sent a malformed batch");
    } catch (const PeerError& e) {
      throw PeerError(with_context("data worker 10.0.0.3:6000", e));
    }
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "data worker 10.0.0.3:6000: sent a malformed batch");
  }
}

}  // namespace
}  // namespace tandem
