// Before each spec file (Jest's setupFiles, in the spec's own module registry): the suite's client
// configuration (dist/test/test-constants.js, which names http://localhost:8081) is pointed at the registry
// in RAFTLOG_REGISTRY_URL. The object is the one the spec imports next; no file of the suite is changed.
const url = process.env.RAFTLOG_REGISTRY_URL;
if (!url) {
  throw new Error("RAFTLOG_REGISTRY_URL is not set: the registry the suite should run against");
}
const constants = require("@confluentinc/schemaregistry/dist/test/test-constants");
const urls = constants.clientConfig.baseURLs;
urls.splice(0, urls.length, url);
