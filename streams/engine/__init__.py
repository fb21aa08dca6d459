"""The thread budget engine as pure functions: no Faust, no Kafka, no clock of its own (`now` is always passed in).

`streams.topology` wires these to topics and tables; everything here is tested without a broker.
"""
