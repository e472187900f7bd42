#include "services/catalog/catalog.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/price.h"
#include "common/quantity.h"
#include "common/status_macros.h"
#include "common/store/doc_table.h"
#include "common/timestamp.h"
#include "common/update_mask.h"
#include "common/validate.h"

namespace jc::catalog {
namespace {

// `price` (whole units) is the column prices had before they were decimals (migration 27):
// kept filled, truncated, for a reader of the old schema; `price_micros` is the price.
absl::Status RecordPrice(store::Transaction& txn, const std::string& spec, const std::string& center, absl::Time from,
                         int64_t price_micros) {
  return txn
      .Exec("INSERT INTO spec_prices (spec_id, center_id, effective_from, price, price_micros) VALUES ($1, $2, $3, $4, $5) "
            "ON CONFLICT (spec_id, center_id, effective_from) DO UPDATE SET price = excluded.price, "
            "price_micros = excluded.price_micros",
            {spec, center, absl::ToUnixMillis(from), price_micros / kPriceScale, price_micros})
      .status();
}

const std::vector<std::string>& SpecMutableFields() {
  static const auto* f = new std::vector<std::string>{
      "resource_spec_name", "resource_quantity", "service_type", "price",
      "computing_center_list"};
  return *f;
}

const std::vector<std::string>& ImageMutableFields() {
  static const auto* f = new std::vector<std::string>{"name", "ai_center_id", "base_os",
                                                      "framework", "resource_spec", "present_at", "size_mb"};
  return *f;
}

const std::set<std::string>& ServiceTypes() {
  static const auto* s = new std::set<std::string>{"interactive", "batch", "streaming"};
  return *s;
}

// The spec's centers, sorted and without duplicates.
std::vector<std::string> SortedCenters(const v1::ResourceSpec& spec) {
  std::vector<std::string> ids = SplitList(spec.computing_center_list());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// Reads a spec's price and keeps it in its canonical text ("1.50" is kept as "1.5", none as "0").
absl::Status CanonicalPrice(v1::ResourceSpec* spec) {
  JC_ASSIGN_OR_RETURN(int64_t micros, ParsePrice(spec->price()));
  spec->set_price(FormatPrice(micros));
  return absl::OkStatus();
}

// A price column: millionths.
std::optional<int64_t> PriceColumn(const std::optional<std::string>& column) {
  int64_t micros = 0;
  if (!column.has_value() || !absl::SimpleAtoi(*column, &micros)) return std::nullopt;
  return micros;
}

}  // namespace

absl::StatusOr<Demand> SpecDemand(const v1::ResourceSpec& spec) {
  if (spec.resource_quantity().empty()) {
    return absl::InvalidArgumentError(
        "resource_quantity is required, e.g. {\"cpu\":\"1\",\"memory\":\"2Gi\",\"gpu\":\"1\"}");
  }
  Demand d;
  for (const auto& [name, text] : spec.resource_quantity()) {
    JC_RETURN_IF_ERROR(CheckRequiredText("resource_quantity key", name));
    auto q = Quantity::Parse(text);
    if (!q.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource_quantity[\"", name, "\"]: ", q.status().message()));
    }
    auto units = [&]() -> absl::StatusOr<int32_t> {
      int64_t v = name == "memory"    ? q->CeilMebibytes()
                  : name == "storage" ? q->CeilGibibytes()
                                      : q->CeilUnits();
      if (v > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat("resource_quantity[\"", name, "\"] = ", text, " is too large"));
      }
      return static_cast<int32_t>(v);
    };
    auto& t = d.table2;
    if (name == "cpu") {
      JC_ASSIGN_OR_RETURN(int32_t v, units());
      t.set_cpu(v);
    } else if (name == "gpu") {
      JC_ASSIGN_OR_RETURN(int32_t v, units());
      t.set_gpu(v);
    } else if (name == "npu") {
      JC_ASSIGN_OR_RETURN(int32_t v, units());
      t.set_npu(v);
    } else if (name == "mlu") {
      JC_ASSIGN_OR_RETURN(int32_t v, units());
      t.set_mlu(v);
    } else if (name == "memory") {
      JC_ASSIGN_OR_RETURN(int32_t v, units());
      t.set_memory(v);
    } else if (name == "storage") {
      JC_ASSIGN_OR_RETURN(int32_t v, units());
      t.set_storage(v);
    } else if (name == "user_define") {
      JC_ASSIGN_OR_RETURN(int32_t v, units());
      t.set_user_define(v);
    } else {
      d.other[name] = q->milli();
    }
  }
  return d;
}

absl::Status ValidateSpec(const v1::ResourceSpec& spec) {
  JC_RETURN_IF_ERROR(CheckId("resource_spec_id", spec.resource_spec_id()));
  JC_RETURN_IF_ERROR(CheckRequiredText("resource_spec_name", spec.resource_spec_name()));
  JC_RETURN_IF_ERROR(SpecDemand(spec).status());
  JC_RETURN_IF_ERROR(CheckRequiredText("service_type", spec.service_type()));
  for (const std::string& type : SplitList(spec.service_type())) {
    if (!ServiceTypes().count(type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "service_type \"", type, "\" is not one of interactive, batch, streaming"));
    }
  }
  JC_RETURN_IF_ERROR(ParsePrice(spec.price()).status());
  for (const std::string& center : SplitList(spec.computing_center_list())) {
    JC_RETURN_IF_ERROR(CheckId("computing_center_list entry", center));
  }
  return absl::OkStatus();
}

absl::Status ValidateImage(const v1::Image& image) {
  JC_RETURN_IF_ERROR(CheckId("image_id", image.image_id()));
  JC_RETURN_IF_ERROR(CheckRequiredText("name", image.name()));
  if (image.project() == "-") {
    // "-" names the federation in requests (GetImageRequest.project): never a project.
    return absl::InvalidArgumentError(
        "project \"-\" names the federation when reading an image; leave project empty to register one for it");
  }
  JC_RETURN_IF_ERROR(CheckId("ai_center_id", image.ai_center_id()));
  JC_RETURN_IF_ERROR(CheckOptionalText("base_os.base_os", image.base_os().base_os()));
  JC_RETURN_IF_ERROR(CheckOptionalText("base_os.cuda_version", image.base_os().cuda_version()));
  JC_RETURN_IF_ERROR(CheckOptionalText("framework", image.framework(), 255));
  for (const std::string& spec : SplitList(image.resource_spec())) {
    JC_RETURN_IF_ERROR(CheckId("resource_spec entry", spec));
  }
  if (!(image.size_mb() >= 0) || image.size_mb() > 1e9) {  // NaN fails too
    return absl::InvalidArgumentError("size_mb must be between 0 (unknown) and 1e9 MB");
  }
  return absl::OkStatus();
}

int32_t InstancesThatFit(const Demand& demand, const v1::ComputingResources& cap,
                         std::string* why) {
  const auto& d = demand.table2;
  const std::tuple<const char*, int32_t, int32_t> rows[] = {
      {"cpu", d.cpu(), cap.cpu()},         {"gpu", d.gpu(), cap.gpu()},
      {"npu", d.npu(), cap.npu()},         {"mlu", d.mlu(), cap.mlu()},
      {"memory", d.memory(), cap.memory()}, {"storage", d.storage(), cap.storage()},
      {"user_define", d.user_define(), cap.user_define()}};
  int64_t fit = std::numeric_limits<int32_t>::max();
  for (const auto& [name, need, have] : rows) {
    if (need <= 0) continue;
    int64_t n = have / need;
    if (n == 0 && why != nullptr && why->empty()) {
      *why = absl::StrCat("needs ", need, " ", name, ", center has ", have);
    }
    fit = std::min(fit, n);
  }
  return static_cast<int32_t>(fit);
}

std::vector<v1::PriceChange> PriceSteps(int64_t spec_price, std::vector<PriceRow> spec_rows,
                                        std::optional<int64_t> center_price, std::vector<PriceRow> center_rows) {
  // Prices kept before there was a history stand from the start.
  if (spec_rows.empty()) spec_rows.push_back({0, spec_price});
  if (center_rows.empty() && center_price.has_value()) center_rows.push_back({0, *center_price});
  auto by_time = [](const PriceRow& a, const PriceRow& b) { return a.effective_from_ms < b.effective_from_ms; };
  std::sort(spec_rows.begin(), spec_rows.end(), by_time);
  std::sort(center_rows.begin(), center_rows.end(), by_time);
  std::set<int64_t> instants;
  for (const auto& r : spec_rows) instants.insert(r.effective_from_ms);
  for (const auto& r : center_rows) instants.insert(r.effective_from_ms);
  auto in_force = [](const std::vector<PriceRow>& rows, int64_t at) -> std::optional<int64_t> {
    std::optional<int64_t> p;
    for (const auto& r : rows) {
      if (r.effective_from_ms <= at) p = r.price_micros;
    }
    return p;
  };
  std::vector<v1::PriceChange> steps;
  for (int64_t at : instants) {
    std::optional<int64_t> p = in_force(center_rows, at);
    if (!p) p = in_force(spec_rows, at);
    if (!p) p = spec_rows.front().price_micros;  // before the spec's first price: its first
    if (!steps.empty() && steps.back().price() == FormatPrice(*p)) continue;
    v1::PriceChange step;
    *step.mutable_effective_from() = ToTimestamp(absl::FromUnixMillis(at));
    step.set_price(FormatPrice(*p));
    steps.push_back(std::move(step));
  }
  return steps;
}

int64_t PriceAt(const std::vector<v1::PriceChange>& steps, absl::Time at) {
  if (steps.empty()) return 0;
  int64_t price = StoredPrice(steps.front().price());
  for (const auto& s : steps) {
    if (FromTimestamp(s.effective_from()) <= at) price = StoredPrice(s.price());
  }
  return price;
}

Catalog::Catalog(store::Store* store, const Clock* clock, registry::CenterDirectory* centers)
    : store_(store), clock_(clock), centers_(centers) {}

absl::StatusOr<std::vector<std::string>> Catalog::CheckCenters(v1::ResourceSpec* spec) {
  std::vector<std::string> ids = SortedCenters(*spec);
  for (const std::string& id : ids) {
    auto center = centers_->GetCenter(id);
    if (absl::IsNotFound(center.status())) {
      return absl::InvalidArgumentError(
          absl::StrCat("computing_center_list names unknown center \"", id, "\""));
    }
    JC_RETURN_IF_ERROR(center.status());
  }
  spec->set_computing_center_list(JoinList(ids));
  return ids;
}

absl::StatusOr<v1::ResourceSpec> Catalog::CreateSpec(v1::ResourceSpec spec) {
  JC_RETURN_IF_ERROR(ValidateSpec(spec));
  JC_RETURN_IF_ERROR(CanonicalPrice(&spec));
  JC_ASSIGN_OR_RETURN(std::vector<std::string> centers, CheckCenters(&spec));
  auto now = ToTimestamp(clock_->Now());
  *spec.mutable_created_at() = now;
  *spec.mutable_updated_at() = now;
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(spec));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  auto inserted = txn->Exec("INSERT INTO resource_specs (id, service_type, doc) VALUES ($1, $2, $3)",
                            {spec.resource_spec_id(), spec.service_type(), doc});
  if (absl::IsAlreadyExists(inserted.status())) {
    return absl::AlreadyExistsError(
        absl::StrCat("resource spec \"", spec.resource_spec_id(), "\" already exists"));
  }
  JC_RETURN_IF_ERROR(inserted.status());
  for (const std::string& center : centers) {
    JC_RETURN_IF_ERROR(txn->Exec("INSERT INTO spec_centers (spec_id, center_id) VALUES ($1, $2)",
                                 {spec.resource_spec_id(), center})
                           .status());
  }
  // The spec's price, from its creation on (a spec created again starts a new history).
  JC_RETURN_IF_ERROR(txn->Exec("DELETE FROM spec_prices WHERE spec_id = $1", {spec.resource_spec_id()}).status());
  JC_RETURN_IF_ERROR(RecordPrice(*txn, spec.resource_spec_id(), "", clock_->Now(), StoredPrice(spec.price())));
  JC_RETURN_IF_ERROR(txn->Commit());
  return spec;
}

absl::StatusOr<v1::ResourceSpec> Catalog::GetSpec(const std::string& id) {
  JC_RETURN_IF_ERROR(CheckId("resource_spec_id", id));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  return store::LoadDoc<v1::ResourceSpec>(*txn, "resource_specs", "resource spec", id);
}

absl::StatusOr<v1::ResourceSpec> Catalog::UpdateSpec(const v1::ResourceSpec& patch,
                                                     const google::protobuf::FieldMask& mask) {
  JC_RETURN_IF_ERROR(CheckId("resource_spec_id", patch.resource_spec_id()));
  // Centers are checked before the transaction opens: the directory may call the
  // registry, which must not wait on a transaction this call holds.
  JC_ASSIGN_OR_RETURN(v1::ResourceSpec draft, GetSpec(patch.resource_spec_id()));
  JC_RETURN_IF_ERROR(ApplyUpdate(patch, mask, SpecMutableFields(), {"resource_spec_id"}, &draft));
  JC_RETURN_IF_ERROR(ValidateSpec(draft));
  JC_ASSIGN_OR_RETURN(std::vector<std::string> centers, CheckCenters(&draft));

  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::ResourceSpec spec,
                      store::LoadDoc<v1::ResourceSpec>(*txn, "resource_specs", "resource spec",
                                                       patch.resource_spec_id(),
                                                       store_->for_update()));
  const int64_t price_before = StoredPrice(spec.price());
  JC_RETURN_IF_ERROR(ApplyUpdate(patch, mask, SpecMutableFields(), {"resource_spec_id"}, &spec));
  JC_RETURN_IF_ERROR(CanonicalPrice(&spec));
  if (StoredPrice(spec.price()) != price_before) {
    // A new price from now on; what ran before keeps the price it was billed at.
    JC_RETURN_IF_ERROR(RecordPrice(*txn, spec.resource_spec_id(), "", clock_->Now(), StoredPrice(spec.price())));
  }
  if (SortedCenters(spec) != centers) {
    return absl::AbortedError("the spec's center list changed during the update; retry");
  }
  spec.set_computing_center_list(draft.computing_center_list());
  *spec.mutable_updated_at() = ToTimestamp(clock_->Now());
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(spec));
  JC_RETURN_IF_ERROR(txn->Exec("UPDATE resource_specs SET service_type = $2, doc = $3 WHERE id = $1",
                               {spec.resource_spec_id(), spec.service_type(), doc})
                         .status());
  // Keep per-center prices of centers that stay; drop the rows of centers removed.
  JC_ASSIGN_OR_RETURN(store::Rows existing,
                      txn->Query("SELECT center_id FROM spec_centers WHERE spec_id = $1",
                                 {spec.resource_spec_id()}));
  std::set<std::string> had;
  for (const auto& row : existing) had.insert(*row[0]);
  for (const std::string& center : had) {
    if (std::find(centers.begin(), centers.end(), center) == centers.end()) {
      JC_RETURN_IF_ERROR(txn->Exec("DELETE FROM spec_centers WHERE spec_id = $1 AND center_id = $2",
                                   {spec.resource_spec_id(), center})
                             .status());
    }
  }
  for (const std::string& center : centers) {
    if (had.count(center)) continue;
    JC_RETURN_IF_ERROR(txn->Exec("INSERT INTO spec_centers (spec_id, center_id) VALUES ($1, $2)",
                                 {spec.resource_spec_id(), center})
                           .status());
  }
  JC_RETURN_IF_ERROR(txn->Commit());
  return spec;
}

absl::Status Catalog::DeleteSpec(const std::string& id) {
  JC_RETURN_IF_ERROR(CheckId("resource_spec_id", id));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(int64_t n, txn->Exec("DELETE FROM resource_specs WHERE id = $1", {id}));
  if (n == 0) return absl::NotFoundError(absl::StrCat("resource spec \"", id, "\" not found"));
  JC_RETURN_IF_ERROR(txn->Exec("DELETE FROM spec_centers WHERE spec_id = $1", {id}).status());
  JC_RETURN_IF_ERROR(txn->Exec("DELETE FROM spec_prices WHERE spec_id = $1", {id}).status());
  return txn->Commit();
}

absl::StatusOr<v1::ListResourceSpecsResponse> Catalog::ListSpecs(
    const v1::ListResourceSpecsRequest& req) {
  std::vector<store::Condition> where;
  if (!req.ai_center_id().empty()) {
    where.push_back({"id IN (SELECT spec_id FROM spec_centers WHERE center_id = $?)",
                     req.ai_center_id()});
  }
  if (!req.service_type().empty()) {
    // service_type holds a comma list; match whole items only.
    where.push_back({"(',' || service_type || ',') LIKE $?",
                     absl::StrCat("%,", req.service_type(), ",%")});
  }
  JC_ASSIGN_OR_RETURN(store::DocPage page, store::ListDocs(*store_, "resource_specs", where,
                                                          req.page_token(), req.page_size()));
  v1::ListResourceSpecsResponse out;
  for (const auto& doc : page.docs) {
    JC_ASSIGN_OR_RETURN(*out.add_specs(), store::DecodeDoc<v1::ResourceSpec>(doc));
  }
  out.set_next_page_token(page.next_page_token);
  return out;
}

absl::StatusOr<v1::SpecCenterOffer> Catalog::MakeOffer(const v1::ResourceSpec& spec,
                                                       const std::string& center_id,
                                                       std::optional<int64_t> price_micros) {
  v1::SpecCenterOffer offer;
  offer.set_resource_spec_id(spec.resource_spec_id());
  offer.set_ai_center_id(center_id);
  JC_ASSIGN_OR_RETURN(auto rows, PriceRows(spec.resource_spec_id()));
  std::vector<v1::PriceChange> steps = PriceSteps(StoredPrice(spec.price()), rows[""], price_micros, rows[center_id]);
  offer.set_price(FormatPrice(PriceAt(steps, clock_->Now())));
  for (auto& step : steps) *offer.add_prices() = std::move(step);
  auto center = centers_->GetCenter(center_id);
  if (absl::IsNotFound(center.status())) {
    offer.set_reason("center is no longer registered");
    return offer;
  }
  JC_RETURN_IF_ERROR(center.status());
  offer.set_center_status(center->status());
  JC_ASSIGN_OR_RETURN(Demand demand, SpecDemand(spec));
  std::string why;
  offer.set_capacity_instances(InstancesThatFit(demand, center->capacity(), &why));
  std::optional<v1::ComputingResources> free = free_ ? free_(center_id) : std::nullopt;
  offer.set_free_instances(free.has_value() ? InstancesThatFit(demand, *free, nullptr) : -1);
  if (offer.capacity_instances() == 0) {
    offer.set_reason(why);
  } else if (center->status() != 1) {
    offer.set_reason(center->status() == 0 ? "center is unavailable" : "center status is unknown");
  } else {
    offer.set_can_run(true);
  }
  return offer;
}

absl::StatusOr<std::map<std::string, std::vector<PriceRow>>> Catalog::PriceRows(const std::string& spec_id) {
  JC_ASSIGN_OR_RETURN(store::Rows rows, store_->Query("SELECT center_id, effective_from, price_micros FROM spec_prices "
                                                      "WHERE spec_id = $1",
                                                      {spec_id}));
  std::map<std::string, std::vector<PriceRow>> out;
  for (const auto& row : rows) {
    PriceRow r;
    if (!row[1] || !row[2] || !absl::SimpleAtoi(*row[1], &r.effective_from_ms) ||
        !absl::SimpleAtoi(*row[2], &r.price_micros)) {
      return absl::DataLossError(absl::StrCat("a price of spec ", spec_id, " is unreadable"));
    }
    out[row[0].value_or("")].push_back(r);
  }
  return out;
}

absl::StatusOr<v1::SpecCenterOffer> Catalog::SetSpecCenterPrice(
    const v1::SetSpecCenterPriceRequest& req) {
  JC_RETURN_IF_ERROR(CheckId("resource_spec_id", req.resource_spec_id()));
  JC_RETURN_IF_ERROR(CheckId("ai_center_id", req.ai_center_id()));
  JC_ASSIGN_OR_RETURN(const int64_t price, ParsePrice(req.price()));
  if (req.price().empty()) return absl::InvalidArgumentError("price is required: the price per hour at the center (0 or more)");
  const absl::Time now = clock_->Now();
  absl::Time effective = req.has_effective_from() ? FromTimestamp(req.effective_from()) : now;
  // A minute's grace for clocks a little apart; earlier would reprice attempts already
  // running (and, for ended ones, contradict the price their records kept).
  if (effective < now - absl::Minutes(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "effective_from ", absl::FormatTime(effective), " is in the past: a price takes effect now or later, "
        "so what was billed stays billed"));
  }
  if (effective > now + absl::Hours(24 * 366 * 5)) {
    return absl::InvalidArgumentError("effective_from is more than five years ahead");
  }
  effective = std::max(effective, now);
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  JC_ASSIGN_OR_RETURN(v1::ResourceSpec spec,
                      store::LoadDoc<v1::ResourceSpec>(*txn, "resource_specs", "resource spec",
                                                       req.resource_spec_id()));
  JC_ASSIGN_OR_RETURN(store::Rows offered, txn->Query("SELECT price_micros FROM spec_centers WHERE spec_id = $1 AND "
                                                      "center_id = $2",
                                                      {req.resource_spec_id(), req.ai_center_id()}));
  if (offered.empty()) {
    return absl::NotFoundError(absl::StrCat("resource spec \"", req.resource_spec_id(),
                                            "\" is not offered by center \"", req.ai_center_id(),
                                            "\"; add the center to computing_center_list first"));
  }
  // The center's first price with a history: the one it had before stands until now.
  JC_ASSIGN_OR_RETURN(store::Rows history, txn->Query("SELECT COUNT(*) FROM spec_prices WHERE spec_id = $1 AND "
                                                      "center_id = $2",
                                                      {req.resource_spec_id(), req.ai_center_id()}));
  std::optional<int64_t> column = PriceColumn(offered[0][0]);
  if (!history.empty() && history[0][0].value_or("0") == "0" && column.has_value()) {
    JC_RETURN_IF_ERROR(RecordPrice(*txn, req.resource_spec_id(), req.ai_center_id(), absl::UnixEpoch(), *column));
  }
  JC_RETURN_IF_ERROR(RecordPrice(*txn, req.resource_spec_id(), req.ai_center_id(), effective, price));
  if (effective <= now) {
    JC_RETURN_IF_ERROR(txn->Exec("UPDATE spec_centers SET price = $3, price_micros = $4 WHERE spec_id = $1 AND "
                                 "center_id = $2",
                                 {req.resource_spec_id(), req.ai_center_id(), price / kPriceScale, price})
                           .status());
  }
  JC_RETURN_IF_ERROR(txn->Commit());
  if (effective <= now) column = price;
  return MakeOffer(spec, req.ai_center_id(), column);
}

absl::StatusOr<v1::ListSpecCenterOffersResponse> Catalog::ListOffers(
    const v1::ListSpecCenterOffersRequest& req) {
  if (req.resource_spec_id().empty() == req.ai_center_id().empty()) {
    return absl::InvalidArgumentError("give exactly one of resource_spec_id and ai_center_id");
  }
  store::Rows rows;
  if (!req.resource_spec_id().empty()) {
    JC_RETURN_IF_ERROR(GetSpec(req.resource_spec_id()).status());
    JC_ASSIGN_OR_RETURN(rows, store_->Query("SELECT spec_id, center_id, price_micros FROM spec_centers "
                                            "WHERE spec_id = $1 ORDER BY center_id",
                                            {req.resource_spec_id()}));
  } else {
    JC_RETURN_IF_ERROR(CheckId("ai_center_id", req.ai_center_id()));
    JC_ASSIGN_OR_RETURN(rows, store_->Query("SELECT spec_id, center_id, price_micros FROM spec_centers "
                                            "WHERE center_id = $1 ORDER BY spec_id",
                                            {req.ai_center_id()}));
  }
  v1::ListSpecCenterOffersResponse out;
  for (const auto& row : rows) {
    JC_ASSIGN_OR_RETURN(v1::ResourceSpec spec, GetSpec(*row[0]));
    JC_ASSIGN_OR_RETURN(*out.add_offers(), MakeOffer(spec, *row[1], PriceColumn(row[2])));
  }
  return out;
}

absl::Status Catalog::CheckImageReferences(v1::Image* image) {
  auto center = centers_->GetCenter(image->ai_center_id());
  if (absl::IsNotFound(center.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("ai_center_id names unknown center \"", image->ai_center_id(), "\""));
  }
  JC_RETURN_IF_ERROR(center.status());
  std::set<std::string> present;
  for (const std::string& id : image->present_at()) {
    if (id == image->ai_center_id() || !present.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("present_at lists center \"", id, "\" twice"));
    }
    auto other = centers_->GetCenter(id);
    if (absl::IsNotFound(other.status())) {
      return absl::InvalidArgumentError(absl::StrCat("present_at names unknown center \"", id, "\""));
    }
    JC_RETURN_IF_ERROR(other.status());
  }
  std::vector<std::string> specs = SplitList(image->resource_spec());
  for (const std::string& spec : specs) {
    auto found = GetSpec(spec);
    if (absl::IsNotFound(found.status())) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource_spec names unknown resource spec \"", spec, "\""));
    }
    JC_RETURN_IF_ERROR(found.status());
  }
  image->set_resource_spec(JoinList(specs));
  return absl::OkStatus();
}

absl::Status Catalog::ResolveContent(v1::Image* image, const oci::Cancelled& cancelled) {
  if (image->reference().empty()) {
    if (!image->digest().empty() || !image->platform().empty()) {
      return absl::InvalidArgumentError(
          "digest and platform are what the registry says of the image's reference: give reference "
          "(registry/repository:tag, or ...@sha256:... to pin one)");
    }
    return absl::OkStatus();
  }
  if (!image->digest().empty() || !image->platform().empty()) {
    return absl::InvalidArgumentError(
        "digest and platform are what the registry says of the reference; to pin a digest write it in the "
        "reference (...@sha256:...)");
  }
  JC_ASSIGN_OR_RETURN(oci::ImageReference ref, oci::ImageReference::Parse(image->reference()));
  if (!resolve_) {
    return absl::FailedPreconditionError("this catalog resolves no image references (it has no registry client)");
  }
  auto resolved = resolve_(ref, cancelled);
  if (!resolved.ok()) {
    // What the registry said is about the reference (400), not about the caller's rights
    // here; a registry that cannot be reached now may answer later (503); too many
    // registrations asking registries at once may be tried again shortly (429); a caller
    // who gave up is told so.
    absl::Status why = resolved.status();
    if (absl::IsUnavailable(why) || absl::IsDeadlineExceeded(why)) return absl::UnavailableError(why.message());
    if (absl::IsResourceExhausted(why) || absl::IsCancelled(why)) return why;
    return absl::InvalidArgumentError(why.message());
  }
  image->set_reference(ref.ToString());
  image->set_digest(resolved->digest);
  image->set_platform(resolved->platform);
  if (image->size_mb() == 0) image->set_size_mb(static_cast<double>(resolved->size_bytes) / (1024.0 * 1024.0));
  return absl::OkStatus();
}

absl::StatusOr<v1::Image> Catalog::CreateImage(v1::Image image, const oci::Cancelled& cancelled) {
  JC_RETURN_IF_ERROR(ValidateImage(image));
  JC_RETURN_IF_ERROR(CheckImageReferences(&image));
  // The registry is asked before anything is written; its answer is what runs.
  JC_RETURN_IF_ERROR(ResolveContent(&image, cancelled));
  auto now = ToTimestamp(clock_->Now());
  *image.mutable_created_at() = now;
  *image.mutable_updated_at() = now;
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(image));
  // Keyed by (project, id): an id is unique within its project, and another project's
  // images never collide with it (issue 44, hole 13), so the answer says nothing of them.
  auto inserted = store_->Exec("INSERT INTO images (project, id, center_id, framework, doc) "
                               "VALUES ($1, $2, $3, $4, $5)",
                               {image.project(), image.image_id(), image.ai_center_id(), image.framework(), doc});
  if (absl::IsAlreadyExists(inserted.status())) return AddImageCenter(image);
  JC_RETURN_IF_ERROR(inserted.status());
  return image;
}

namespace {

absl::StatusOr<v1::Image> LoadImage(store::Transaction& txn, const std::string& project, const std::string& id,
                                    absl::string_view lock_suffix = "") {
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      txn.Query(absl::StrCat("SELECT doc FROM images WHERE project = $1 AND id = $2", lock_suffix),
                                {project, id}));
  if (rows.empty()) return absl::NotFoundError(absl::StrCat("image \"", id, "\" not found"));
  return store::DecodeDoc<v1::Image>(rows[0][0]);
}

}  // namespace

// One image, many centers (A4): the same image registered at another center adds that
// center to its image x center list, so jobs naming it may run there too. Refused when
// it is already known there, or when the registration describes another image under the
// same id (another name, framework, base OS or reference) in the same project.
absl::StatusOr<v1::Image> Catalog::AddImageCenter(const v1::Image& registration) {
  const std::string& id = registration.image_id();
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  auto loaded = LoadImage(*txn, registration.project(), id, store_->for_update());
  if (absl::IsNotFound(loaded.status())) {  // deleted meanwhile: a retry creates it
    return absl::AlreadyExistsError(absl::StrCat("image \"", id, "\" already exists"));
  }
  JC_RETURN_IF_ERROR(loaded.status());
  v1::Image image = std::move(*loaded);
  if (image.name() != registration.name() || image.framework() != registration.framework() ||
      image.reference() != registration.reference() ||
      image.base_os().base_os() != registration.base_os().base_os() ||
      image.base_os().cuda_version() != registration.base_os().cuda_version()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "image \"", id, "\" already exists with another name, framework, base OS or reference; registering it at another "
        "center needs the same description (or choose another image_id)"));
  }
  const std::string& center = registration.ai_center_id();
  bool known = image.ai_center_id() == center ||
               std::find(image.present_at().begin(), image.present_at().end(), center) != image.present_at().end();
  if (known) {
    return absl::AlreadyExistsError(absl::StrCat("image \"", id, "\" is already registered at center \"", center, "\""));
  }
  image.add_present_at(center);
  *image.mutable_updated_at() = ToTimestamp(clock_->Now());
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(image));
  JC_RETURN_IF_ERROR(
      txn->Exec("UPDATE images SET doc = $3 WHERE project = $1 AND id = $2", {image.project(), id, doc}).status());
  JC_RETURN_IF_ERROR(txn->Commit());
  return image;
}

absl::StatusOr<v1::Image> Catalog::GetImage(const std::string& project, const std::string& id) {
  JC_RETURN_IF_ERROR(CheckId("image_id", id));
  JC_ASSIGN_OR_RETURN(auto txn, store_->Begin());
  return LoadImage(*txn, project, id);
}

absl::StatusOr<std::vector<v1::Image>> Catalog::FindImages(const std::string& id) {
  JC_RETURN_IF_ERROR(CheckId("image_id", id));
  JC_ASSIGN_OR_RETURN(store::Rows rows,
                      store_->Query("SELECT doc FROM images WHERE id = $1 ORDER BY project", {id}));
  std::vector<v1::Image> out;
  for (const auto& row : rows) {
    JC_ASSIGN_OR_RETURN(out.emplace_back(), store::DecodeDoc<v1::Image>(row[0]));
  }
  return out;
}

absl::StatusOr<v1::Image> Catalog::UpdateImage(const v1::Image& patch,
                                               const google::protobuf::FieldMask& mask) {
  JC_RETURN_IF_ERROR(CheckId("image_id", patch.image_id()));
  JC_ASSIGN_OR_RETURN(v1::Image image, GetImage(patch.project(), patch.image_id()));
  JC_RETURN_IF_ERROR(ApplyUpdate(patch, mask, ImageMutableFields(), {"image_id", "project"}, &image));
  JC_RETURN_IF_ERROR(ValidateImage(image));
  JC_RETURN_IF_ERROR(CheckImageReferences(&image));
  *image.mutable_updated_at() = ToTimestamp(clock_->Now());
  JC_ASSIGN_OR_RETURN(std::string doc, store::EncodeDoc(image));
  JC_ASSIGN_OR_RETURN(int64_t n,
                      store_->Exec("UPDATE images SET center_id = $3, framework = $4, doc = $5 "
                                   "WHERE project = $1 AND id = $2",
                                   {image.project(), image.image_id(), image.ai_center_id(), image.framework(), doc}));
  if (n == 0) return absl::NotFoundError(absl::StrCat("image \"", image.image_id(), "\" not found"));
  return image;
}

absl::Status Catalog::DeleteImage(const std::string& project, const std::string& id) {
  JC_RETURN_IF_ERROR(CheckId("image_id", id));
  JC_ASSIGN_OR_RETURN(int64_t n, store_->Exec("DELETE FROM images WHERE project = $1 AND id = $2", {project, id}));
  if (n == 0) return absl::NotFoundError(absl::StrCat("image \"", id, "\" not found"));
  return absl::OkStatus();
}

absl::StatusOr<v1::ListImagesResponse> Catalog::ListImages(const v1::ListImagesRequest& req,
                                                           const std::optional<std::vector<std::string>>& projects) {
  std::vector<store::Condition> where;
  if (!req.project().empty()) where.push_back({"project = $?", req.project() == "-" ? "" : req.project()});
  store::AddProjectScope(projects, &where);
  if (!req.ai_center_id().empty()) where.push_back({"center_id = $?", req.ai_center_id()});
  if (!req.framework().empty()) {
    where.push_back({"(',' || framework || ',') LIKE $?", absl::StrCat("%,", req.framework(), ",%")});
  }
  JC_ASSIGN_OR_RETURN(store::DocPage page,
                      store::ListDocs(*store_, "images", where, req.page_token(), req.page_size(), "project"));
  v1::ListImagesResponse out;
  for (const auto& doc : page.docs) {
    JC_ASSIGN_OR_RETURN(*out.add_images(), store::DecodeDoc<v1::Image>(doc));
  }
  out.set_next_page_token(page.next_page_token);
  return out;
}

}  // namespace jc::catalog
