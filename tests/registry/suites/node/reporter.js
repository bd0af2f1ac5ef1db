// A Jest reporter writing each test's outcome to RAFTLOG_JUDGES_REPORT as JSON:
// {"tests": [{"name", "status": "passed" | "failed" | "skipped", "message"}]}. A spec file that did not
// load is one failed entry named by its path. (Jest's own --json cannot write the axios errors the
// suite's failures carry: they hold circular sockets.)
const fs = require("fs");

const SKIPPED = new Set(["pending", "skipped", "todo", "disabled"]);

class RaftlogReporter {
  onRunComplete(_contexts, results) {
    const out = process.env.RAFTLOG_JUDGES_REPORT;
    if (!out) {
      throw new Error("RAFTLOG_JUDGES_REPORT is not set: where the report goes");
    }
    const tests = [];
    for (const file of results.testResults) {
      if (file.testExecError) {
        tests.push({ name: file.testFilePath, status: "failed", message: String(file.testExecError.message) });
      }
      for (const test of file.testResults) {
        const status = SKIPPED.has(test.status) ? "skipped" : test.status;
        tests.push({ name: test.fullName, status, message: (test.failureMessages || []).join("\n") });
      }
    }
    fs.writeFileSync(out, JSON.stringify({ tests }, null, 1));
  }
}

module.exports = RaftlogReporter;
