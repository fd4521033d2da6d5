"""`kafka-dr demo`: the DR drill (dr_drill, disaster_round_trip) on the embedded stack and real Airflow."""
