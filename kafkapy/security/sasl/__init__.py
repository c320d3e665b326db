"""SASL on the server side, sans-I/O: the exchange of one connection (``exchange``) and one module
per mechanism (``plain``, ``scram``, ``oauthbearer``), with Kafka's JAAS option syntax (``jaas``)."""
