#pragma once

// protobuf's JSON mapping, printed by reflection over the message's descriptors, for the
// shapes the API uses (ADR 0015). protobuf 3.21's printer (util::BinaryToJsonString, what
// MessageToJsonString runs) serializes the message, then walks the bytes against
// google.protobuf.Type descriptions it copies afresh on every call: a fixed cost per
// message type per call that was 6% of the CPU of a submitted job (the create's answer).
// This prints the same bytes without either step.
//
// "The same bytes" is the contract, checked by json_print_test.cc against protobuf's own
// printer on every message of the API filled at random, on every code point, and on the
// quirks it keeps: fields in number order; with defaults, fields in declaration order
// except Timestamps, Durations and oneof members, which come after the others; int64 as
// strings; floats as protobuf's SimpleDtoa/SimpleFtoa; its string escapes.

#include <string>

#include <google/protobuf/message.h>

namespace jc {

// Appends `message` as JSON to *out and returns true; or returns false, *out unchanged,
// when the message holds something this printer leaves to protobuf's: google.protobuf.Any,
// Struct, Value, wrappers, FieldMask, Empty; a Timestamp or Duration in a list or a map, or
// one out of its range (protobuf's printer says why); a map that holds entries (protobuf
// prints them in its Map's hash order, seeded per map, which reflection does not expose);
// a string that is not UTF-8; a proto2 message; a JSON name that needs escaping or that two
// fields share; google.protobuf.NullValue; nesting deeper than 60; a number printed in a
// locale's form (a process that called setlocale).
// `snake_case`: the fields' proto names (else their JSON names); `print_defaults`: fields
// at their default value too (protobuf's always_print_primitive_fields).
bool PrintJson(const google::protobuf::Message& message, bool snake_case, bool print_defaults, std::string* out);

// A Timestamp's `seconds` and `nanos` as protobuf writes them (TimeUtil::ToString, and its
// JSON printer without the quotes): "2026-12-06T14:05:06.716Z", the fraction in 3, 6 or 9
// digits as it needs, none when it is 0. Returns false, *out unchanged, for a time outside
// 0001-01-01 to 9999-12-31 or nanos outside 0-999,999,999.
bool AppendTimestampText(int64_t seconds, int32_t nanos, std::string* out);

}  // namespace jc
