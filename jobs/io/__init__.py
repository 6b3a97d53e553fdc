"""IO: configuration of engines and stores the steps use (Spark, the Delta lake, Kafka, Airflow's environment)."""
