"""kafka-dr's development stack, apart from the product: the local two-DC stack (Apache Kafka nodes or the embedded
broker, schema registries), Airflow's own components for it, the DR demo and the REST client they use. The product
(kafka_dr) never imports it (pyproject.toml's import contracts); its command is `kafka-dr-dev`."""
