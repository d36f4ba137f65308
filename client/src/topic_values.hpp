// Topic values shared by both backends: names of the enums and the subscription options as the
// extension's subscribe takes them.
#pragma once

#include <string>

#include "forgeyard/topics.hpp"

namespace forgeyard::detail {

// The queue options plus event_types, on_full and start (extension's subscribe).
std::string subscription_options_json(const SubscriptionOptions& options);
std::string topic_options_json(const TopicOptions& options);
// A JSON string literal.
std::string json_quote(std::string_view text);

}  // namespace forgeyard::detail
