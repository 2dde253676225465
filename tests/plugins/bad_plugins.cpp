// Deliberately broken plugins for the loader's error tests, one per build (-D picks which):
// TITAN_TEST_BAD_VERSION exports a wrong API version; TITAN_TEST_NO_REGISTER lacks the register function.
#include "titan/plugins/plugin_api.h"

#ifdef TITAN_TEST_BAD_VERSION
extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION + 100; }
extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar&) {}
#endif
#ifdef TITAN_TEST_NO_REGISTER
extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }
#endif
