"""Everything Airflow: the task factory the DAG files chain steps with, the approval step, the failure notifier and
the environment the demo and the tests run Airflow in. The top floor: it imports the pipeline, nothing imports it
but `dags/`, the demo and the tests."""
