"""A Confluent-compatible schema registry: the schema types (Avro, JSON Schema, Protobuf: parsing,
canonical text, compatibility, records encoded and decoded), the replicated table of subjects, versions,
ids, configs and modes held in ``__schemas``, and the ``RegistryService`` the doors ask."""
