#pragma once

// protobuf's JSON mapping read into a message by reflection, from a document nlohmann has
// already parsed (the gateway parses every REST body so to check its fields first), for the
// shapes a request body uses (ADR 0016). protobuf 3.21's parser (util::JsonToBinaryString,
// what JsonStringToMessage runs) tokenises the text again, copies a google.protobuf.Type
// description per message type per call, writes the wire format and parses that: 5% of the
// CPU of a submitted job in the trainjob bench.
//
// "The same message" is the contract: FillFromJson(doc, m) fills m exactly as protobuf's
// parser fills it from doc.dump(), or declines. It never accepts what protobuf's parser
// refuses, so a body it declines, right or wrong, is protobuf's to read and to word the
// error of. Checked by json_fill_test.cc against protobuf's parser on every message of the
// API filled at random and on documents mutated at random, and by the trainjob_body fuzz
// harness.

#include <google/protobuf/message.h>
#include <nlohmann/json_fwd.hpp>

namespace jc {

// Clears *message and fills it from `doc` and returns true; or returns false, *message
// cleared, when `doc` holds something this reader leaves to protobuf's parser: a message of
// google.protobuf's (Timestamp, Duration, Struct, Any, wrappers, FieldMask, Empty) or of a
// proto2 file, or of another pool than the program's own; a map whose keys are not strings; a float or bytes field; a
// `null`; a number for an enum or a string for a number; an integer out of its field's range
// or a fraction for one; a double the document holds as not finite, or an integer past 2^53
// for one; an enum name the enum lacks; a key that names no field, or that names two (one's
// proto name the other's JSON name); a field named twice (by both its names) or two members
// of one oneof; nesting deeper than 60 objects; a string or map key that is not UTF-8 (a
// document built in code: nlohmann's parser takes none); anything not an object where a
// message goes.
bool FillFromJson(const nlohmann::json& doc, google::protobuf::Message* message);

}  // namespace jc
