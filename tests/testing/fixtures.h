#pragma once

// Small builders of valid resources, so each test states only what it is about.

#include "jointcloud/v1/catalog.pb.h"
#include "jointcloud/v1/datamon.pb.h"
#include "jointcloud/v1/registry.pb.h"

namespace jc::testing {

inline jointcloud::v1::Center MakeCenter(const std::string& id, const std::string& region = "north") {
  jointcloud::v1::Center c;
  c.set_ai_center_id(id);
  c.set_name("Center " + id);
  c.set_region(region);
  c.add_geometry(116.4);
  c.add_geometry(39.9);
  c.mutable_capacity()->set_cpu(128);
  c.mutable_capacity()->set_gpu(8);
  c.mutable_capacity()->set_memory(512 * 1024);
  c.mutable_capacity()->set_storage(10000);
  c.add_data_roots("/data");
  return c;
}

inline jointcloud::v1::ResourceSpec MakeSpec(const std::string& id, const std::string& centers) {
  jointcloud::v1::ResourceSpec s;
  s.set_resource_spec_id(id);
  s.set_resource_spec_name("Spec " + id);
  (*s.mutable_resource_quantity())["cpu"] = "4";
  (*s.mutable_resource_quantity())["memory"] = "16Gi";
  (*s.mutable_resource_quantity())["gpu"] = "1";
  s.set_service_type("batch");
  s.set_price("10");
  s.set_computing_center_list(centers);
  return s;
}

}  // namespace jc::testing
