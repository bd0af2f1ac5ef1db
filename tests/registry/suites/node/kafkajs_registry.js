// KafkaJS's registry client (@kafkajs/confluent-schema-registry) as its users call it, one step of
// tests/registry/test_clients.py's kafkajs test per run (a fresh client each time: nothing cached across a
// node's kill). The request is a JSON file: {"schemas": {kind: {"type", "schema", "subject"}}, "values":
// {kind: [...]}, ...}; the answer is one JSON line on stdout.
//
//   node kafkajs_registry.js write URL REQUEST   register each schema, encode its values: {"ids", "payloads"}
//   node kafkajs_registry.js read URL REQUEST    decode request.payloads (base64) and register
//                                                request.evolve under its subject: {"values", "new_id"}
//   node kafkajs_registry.js check URL REQUEST   decode request.payloads, the latest id of request.evolve's
//                                                subject and the schema of request.new_id: {"values",
//                                                "latest_id", "new_schema_found"}
const fs = require("fs");
const { SchemaRegistry, SchemaType } = require("@kafkajs/confluent-schema-registry");

async function decodeAll(registry, payloads) {
  const values = {};
  for (const [kind, encoded] of Object.entries(payloads)) {
    values[kind] = [];
    for (const text of encoded) {
      const value = await registry.decode(Buffer.from(text, "base64"));
      values[kind].push(JSON.parse(JSON.stringify(value))); // a Protobuf message as its JSON
    }
  }
  return values;
}

async function main() {
  const [step, url, requestFile] = process.argv.slice(2);
  const request = JSON.parse(fs.readFileSync(requestFile, "utf8"));
  const registry = new SchemaRegistry({ host: url });
  let answer;
  if (step === "write") {
    answer = { ids: {}, payloads: {} };
    for (const [kind, { type, schema, subject }] of Object.entries(request.schemas)) {
      const { id } = await registry.register({ type: SchemaType[type], schema }, { subject });
      answer.ids[kind] = id;
      answer.payloads[kind] = [];
      for (const value of request.values[kind]) {
        answer.payloads[kind].push((await registry.encode(id, value)).toString("base64"));
      }
    }
  } else if (step === "read") {
    const values = await decodeAll(registry, request.payloads);
    const { type, schema, subject } = request.evolve;
    const { id } = await registry.register({ type: SchemaType[type], schema }, { subject });
    answer = { values, new_id: id };
  } else if (step === "check") {
    const values = await decodeAll(registry, request.payloads);
    const latestId = await registry.getLatestSchemaId(request.evolve.subject);
    const newSchema = await registry.getSchema(request.new_id);
    answer = { values, latest_id: latestId, new_schema_found: newSchema !== undefined };
  } else {
    throw new Error(`unknown step ${step}: write, read or check`);
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}

main().catch((error) => {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
