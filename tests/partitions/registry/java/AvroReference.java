// Apache Avro's Java library answering for the registry's Avro schema type (tests/partitions/registry/
// test_avro_java.py): each case's schemas parsed as Confluent's registry parses a schema registered anew
// (a Schema.Parser with the strict name validator and default validation, each reference parsed first),
// printed as its canonicalString() prints them (Schema.toString with the references written by name), and
// SchemaCompatibility.checkReaderWriterCompatibility(reader, writer) with each incompatibility's type,
// location and message; a case's datum (Avro's JSON encoding) read with Avro's JsonDecoder, written with its
// binary encoder (hex) and read back and written again with its JsonEncoder. Input: a JSON file of cases;
// output: a JSON array of answers on stdout.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.util.ArrayList;
import java.util.List;
import org.apache.avro.NameValidator;
import org.apache.avro.Schema;
import org.apache.avro.SchemaCompatibility;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.avro.io.JsonEncoder;

public class AvroReference {
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private static Schema parse(List<String> references, String text) {
    Schema.Parser parser = new Schema.Parser(NameValidator.STRICT_VALIDATOR);
    parser.setValidateDefaults(true);
    for (String reference : references) {
      parser.parse(reference);
    }
    return parser.parse(text);
  }

  private static String canonical(List<String> references, Schema schema) {
    Schema.Parser parser = new Schema.Parser(NameValidator.STRICT_VALIDATOR);
    List<Schema> referenced = new ArrayList<>();
    for (String reference : references) {
      referenced.add(parser.parse(reference));
    }
    return schema.toString(referenced, false);
  }

  private static void datum(Schema schema, String json, ObjectNode answer) throws Exception {
    Object datum = new GenericDatumReader<Object>(schema).read(null, DecoderFactory.get().jsonDecoder(schema, json));
    ByteArrayOutputStream binary = new ByteArrayOutputStream();
    BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(binary, null);
    new GenericDatumWriter<Object>(schema).write(datum, encoder);
    encoder.flush();
    StringBuilder hex = new StringBuilder();
    for (byte b : binary.toByteArray()) {
      hex.append(String.format("%02x", b));
    }
    answer.put("binary", hex.toString());
    Object back = new GenericDatumReader<Object>(schema)
        .read(null, DecoderFactory.get().binaryDecoder(binary.toByteArray(), null));
    ByteArrayOutputStream text = new ByteArrayOutputStream();
    JsonEncoder json2 = EncoderFactory.get().jsonEncoder(schema, text);
    new GenericDatumWriter<Object>(schema).write(back, json2);
    json2.flush();
    answer.put("json", text.toString("UTF-8"));
  }

  private static String describe(Exception error) {
    return error.getClass().getSimpleName() + ": " + error.getMessage();
  }

  public static void main(String[] args) throws Exception {
    JsonNode cases = MAPPER.readTree(new File(args[0]));
    ArrayNode answers = MAPPER.createArrayNode();
    for (JsonNode item : cases) {
      List<String> references = new ArrayList<>();
      for (JsonNode reference : item.get("references")) {
        references.add(reference.textValue());
      }
      ObjectNode answer = answers.addObject();
      answer.put("id", item.get("id").textValue());
      Schema[] schemas = new Schema[2];
      String[] roles = {"reader", "writer"};
      for (int i = 0; i < 2; i++) {
        JsonNode text = item.get(roles[i]);
        if (text == null || text.isNull()) {
          continue;
        }
        ObjectNode parsed = answer.putObject(roles[i]);
        try {
          schemas[i] = parse(references, text.textValue());
          parsed.put("canonical", canonical(references, schemas[i]));
        } catch (Exception error) {
          parsed.put("error", describe(error));
        }
      }
      JsonNode datum = item.get("datum");
      if (schemas[0] != null && datum != null && !datum.isNull()) {
        try {
          datum(schemas[0], datum.textValue(), answer);
        } catch (Exception error) {
          answer.put("datum_error", describe(error));
        }
      }
      if (schemas[0] != null && schemas[1] != null) {
        try {
          ArrayNode found = answer.putArray("incompatibilities");
          for (SchemaCompatibility.Incompatibility incompatibility : SchemaCompatibility
              .checkReaderWriterCompatibility(schemas[0], schemas[1]).getResult().getIncompatibilities()) {
            ObjectNode one = found.addObject();
            one.put("type", incompatibility.getType().toString());
            one.put("location", incompatibility.getLocation());
            one.put("message", incompatibility.getMessage());
          }
        } catch (Exception error) {
          answer.remove("incompatibilities");
          answer.put("compatibility_error", describe(error));
        }
      }
    }
    System.out.println(MAPPER.writeValueAsString(answers));
  }
}
