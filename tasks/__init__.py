"""Stage and store modules of prefect-microstock: pure logic first, thin Prefect tasks on top."""
