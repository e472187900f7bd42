#pragma once

// Resource-spec catalog with its spec x center mapping (standard 6.1.2, Table 3) and
// the image catalog (6.2, Table 5). Domain logic only: no gRPC types here.

#include <map>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/oci/registry_client.h"
#include "common/store/store.h"
#include "jointcloud/v1/catalog.pb.h"
#include "services/registry/center_directory.h"

namespace jc::catalog {

namespace v1 = ::jointcloud::v1;

// What one instance of a spec needs, in the units of Table 2 (cores, devices, MB, GB).
// Resources outside Table 2 are kept by name in `other` (milli-units).
struct Demand {
  v1::ComputingResources table2;
  std::map<std::string, int64_t> other;
};

// Parses and checks `resource_quantity`; InvalidArgument names the bad entry.
absl::StatusOr<Demand> SpecDemand(const v1::ResourceSpec& spec);
// Checks every field of a spec except the centers it names.
absl::Status ValidateSpec(const v1::ResourceSpec& spec);
absl::Status ValidateImage(const v1::Image& image);

// The price steps of a spec at a center, oldest first, from the spec's own history and the
// center's (issue 31): at each instant the center's latest price in force, else the spec's.
// `center_price` is the center's price kept before prices had a history (used as its
// price from the start when it has no history); the spec's `price` likewise.
// Prices are millionths of the catalog's unit (common/price.h).
struct PriceRow {
  int64_t effective_from_ms = 0;
  int64_t price_micros = 0;
};
std::vector<v1::PriceChange> PriceSteps(int64_t spec_price, std::vector<PriceRow> spec_rows,
                                        std::optional<int64_t> center_price, std::vector<PriceRow> center_rows);
// The price of `steps` in force at `at` (the first step's before it), in millionths.
int64_t PriceAt(const std::vector<v1::PriceChange>& steps, absl::Time at);

// How many instances of `demand` fit in `capacity`; 0 when one does not fit, in which
// case `why` says which resource is short.
int32_t InstancesThatFit(const Demand& demand, const v1::ComputingResources& capacity,
                         std::string* why);

class Catalog {
 public:
  Catalog(store::Store* store, const Clock* clock, registry::CenterDirectory* centers);

  // What a center has free now, from its last usage report (the monitor, where it runs in
  // this process); nullopt when unknown. Offers then say how many instances fit now.
  using FreeResources = std::function<std::optional<v1::ComputingResources>(const std::string& center_id)>;
  void SetFreeResources(FreeResources free) { free_ = std::move(free); }
  // What an image reference is, asked of its registry when an image is registered with one
  // (oci::RegistryClient::Resolve); without it, images with a reference are refused. It
  // stops when `cancelled` says the caller gave up.
  using ImageResolver =
      std::function<absl::StatusOr<oci::ResolvedImage>(const oci::ImageReference&, const oci::Cancelled& cancelled)>;
  void SetImageResolver(ImageResolver resolve) { resolve_ = std::move(resolve); }

  absl::StatusOr<v1::ResourceSpec> CreateSpec(v1::ResourceSpec spec);
  absl::StatusOr<v1::ResourceSpec> GetSpec(const std::string& id);
  absl::StatusOr<v1::ResourceSpec> UpdateSpec(const v1::ResourceSpec& patch,
                                              const google::protobuf::FieldMask& mask);
  absl::Status DeleteSpec(const std::string& id);
  absl::StatusOr<v1::ListResourceSpecsResponse> ListSpecs(const v1::ListResourceSpecsRequest& req);

  absl::StatusOr<v1::SpecCenterOffer> SetSpecCenterPrice(const v1::SetSpecCenterPriceRequest& req);
  absl::StatusOr<v1::ListSpecCenterOffersResponse> ListOffers(
      const v1::ListSpecCenterOffersRequest& req);

  // `cancelled` (may be empty): whether the caller gave up, asked while a registry is.
  absl::StatusOr<v1::Image> CreateImage(v1::Image image, const oci::Cancelled& cancelled = nullptr);
  // Image ids are unique within a project ("": the federation's): an image is named by
  // both. Different projects may hold the same id, each its own image, and a project may
  // hold an id the federation holds too (its jobs then use its own, SPEC C6).
  absl::StatusOr<v1::Image> GetImage(const std::string& project, const std::string& id);
  // Every project's image `id` (the federation's among them), by project: the caller picks
  // those its principal may see.
  absl::StatusOr<std::vector<v1::Image>> FindImages(const std::string& id);
  // The image is patch.project's image patch.image_id.
  absl::StatusOr<v1::Image> UpdateImage(const v1::Image& patch,
                                        const google::protobuf::FieldMask& mask);
  absl::Status DeleteImage(const std::string& project, const std::string& id);
  // `projects`: the projects whose images the caller may see besides the federation's
  // (nullopt: all).
  absl::StatusOr<v1::ListImagesResponse> ListImages(const v1::ListImagesRequest& req,
                                                    const std::optional<std::vector<std::string>>& projects = std::nullopt);

 private:
  // Normalizes the spec's center list and checks that every center is registered.
  absl::StatusOr<std::vector<std::string>> CheckCenters(v1::ResourceSpec* spec);
  absl::Status CheckImageReferences(v1::Image* image);
  // An image registered with a reference: asks the registry for its digest, platform and
  // size. Nothing to do without one.
  absl::Status ResolveContent(v1::Image* image, const oci::Cancelled& cancelled);
  FreeResources free_;
  ImageResolver resolve_;
  absl::StatusOr<v1::Image> AddImageCenter(const v1::Image& registration);
  absl::StatusOr<v1::SpecCenterOffer> MakeOffer(const v1::ResourceSpec& spec,
                                                const std::string& center_id,
                                                std::optional<int64_t> price_micros);
  // The price history rows of a spec, by center ('' for the spec's own).
  absl::StatusOr<std::map<std::string, std::vector<PriceRow>>> PriceRows(const std::string& spec_id);

  store::Store* store_;
  const Clock* clock_;
  registry::CenterDirectory* centers_;
};

}  // namespace jc::catalog
