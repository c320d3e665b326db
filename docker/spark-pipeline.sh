#!/bin/sh
# The compose `spark` service: create the topics, publish $ORDERS order changes, then keep the
# customer view up to date every 5 s (the query resumes from its checkpoint after a restart).
set -eu
cd /opt/kafkapy/examples/orders_cdc
python -c "import pipeline; pipeline.create_topics('$BOOTSTRAP', 'orders', 'customer-view', 3)"
if [ ! -f /var/lib/spark/.orders-published ]; then
  python orders.py --bootstrap "$BOOTSTRAP" --topic orders --count "${ORDERS:-20000}"
  touch /var/lib/spark/.orders-published
fi
exec python pipeline.py --bootstrap "$BOOTSTRAP" --checkpoint /var/lib/spark/checkpoint \
  --out /var/lib/spark/view --trigger 5s
